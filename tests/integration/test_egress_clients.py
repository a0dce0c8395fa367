"""The egress policy where requests leave, over real HTTP to servers on loopback that record
every request: no key reaches a host not listed for it, no redirect is followed, a name that
resolves to loopback is judged by its address, a gzip bomb is read no further than the
bound, on every client path (jury's wire, LiteLLM's client, HTTP endpoint candidates, the
Batch API's client); and `jury submit --dry-run` refuses first, in one paragraph."""

from __future__ import annotations

import json
import socket
import threading
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from jury.cli.main import jury as cli
from jury.errors import EgressRefused, TransientJudgeError
from jury.schemas.batch import Judge
from jury.schemas.candidates import HTTPCandidate
from jury.schemas.egress import EgressPolicy
from jury.simulator.hostile import gzip_bomb
from jury.worker.calls.batch_client import BatchClient, Endpoint
from jury.worker.calls.endpoint_client import ask_endpoint
from jury.worker.calls.llm_client import complete
from jury.worker.engine.loop import EventLoopThread

pytestmark = pytest.mark.integration
MESSAGES = [{"role": "user", "content": "Rate this answer from 1 to 5."}]
OPENAI_KEY = "sk-openai-egress-test-0123456789"
NAMED_KEY = "sk-named-egress-test-9876543210"
ANSWER = {
    "id": "r1",
    "choices": [{"message": {"content": '{"score": 4, "reasoning": "fine"}'}}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 6},
}
# One loop for every call, as a worker keeps one (LiteLLM keeps its sessions per loop).
LOOP = EventLoopThread("test-egress-clients")


@dataclass
class Recorder:
    """A server on loopback that records each request's headers (names in lowercase).
    `/redirect…` answers 307 to the `redirect_to` server, `/bomb…` a gzip bomb,
    `…/chat/completions` an answer, any other path `{"answer": "the internal secret"}`."""

    port: int = 0
    redirect_to: int = 0
    seen: list[dict[str, str]] = field(default_factory=list)

    def url(self, path: str = "/v1") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def carried(self, *secrets: str) -> bool:
        """Whether any request this server received held any of `secrets`."""
        return any(s in value for h in self.seen for value in h.values() for s in secrets)


def serve(recorder: Recorder) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers_seen = {k.lower(): v for k, v in self.headers.items()}
            recorder.seen.append({"path": self.path, **headers_seen})
            headers = {"Content-Type": "application/json"}
            if self.path.startswith("/redirect"):
                status, body = 307, b""
                headers["Location"] = f"http://127.0.0.1:{recorder.redirect_to}/v1/answer"
            elif self.path.startswith("/bomb"):
                status, body = 200, gzip_bomb()
                headers["Content-Encoding"] = "gzip"
            elif self.path.endswith("/chat/completions"):
                status, body = 200, json.dumps(ANSWER).encode()
            else:
                status, body = 200, b'{"answer": "the internal secret"}'
            try:
                self.send_response(status)
                for name, value in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client stopped reading: a bound held

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    recorder.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Recorder, Recorder]]:
    """`allowed`, a host the tests' policies let calls reach, and `other`, the one a redirect
    from it points to."""
    other, allowed = Recorder(), Recorder()
    started = [serve(other), serve(allowed)]
    allowed.redirect_to = other.port
    yield allowed, other
    for server in started:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def planted_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("JURY_TEST_EGRESS_KEY", NAMED_KEY)


def policy(allowed: Recorder, key_host: str = "api.example.com") -> EgressPolicy:
    """`allowed` may be reached; the named key may go only to `key_host`."""
    return EgressPolicy.build(
        allow=f"127.0.0.1:{allowed.port}", key_hosts={"JURY_TEST_EGRESS_KEY": [key_host]}
    )


def judged(judge: Judge, egress: EgressPolicy) -> str:
    """The judge's answer, or its refusal's message (EgressRefused only)."""
    try:
        return LOOP.run(complete(judge, MESSAGES, egress=egress)).text
    except EgressRefused as exc:
        assert not exc.transient and exc.kind == "egress_refused"
        return f"refused: {exc}"


@pytest.mark.parametrize("http_client", ["jury", "litellm"])
def test_a_key_reaches_only_the_hosts_listed_for_it(
    servers: tuple[Recorder, Recorder], http_client: str
) -> None:
    allowed, _ = servers
    allowed.seen.clear()
    base = allowed.url()

    def judge(**extra: str) -> Judge:
        return Judge(model="openai/x", api_base=base, http_client=http_client, **extra)

    # An openai/ judge pointed elsewhere: OPENAI_API_KEY stays home, a placeholder goes.
    assert '"score": 4' in judged(judge(), policy(allowed))
    assert allowed.seen[-1]["authorization"] == "Bearer no-key-needed"
    # A named key listed for another host: refused before anything is sent.
    refusal = judged(judge(api_key_env="JURY_TEST_EGRESS_KEY"), policy(allowed))
    assert "the key in JURY_TEST_EGRESS_KEY may be sent only to api.example.com" in refusal
    assert "JURY_KEY_HOSTS" in refusal and len(allowed.seen) == 1
    refusal = judged(judge(api_key_env="HOME"), policy(allowed))
    assert "HOME is not a key variable" in refusal and len(allowed.seen) == 1
    assert not allowed.carried(OPENAI_KEY, NAMED_KEY)
    # Listed for this host, it goes (the control).
    listed = policy(allowed, key_host=f"127.0.0.1:{allowed.port}")
    assert '"score": 4' in judged(judge(api_key_env="JURY_TEST_EGRESS_KEY"), listed)
    assert allowed.seen[-1]["authorization"] == f"Bearer {NAMED_KEY}"
    # A host the policy does not allow is not reached at all, key or none.
    refusal = judged(judge(), EgressPolicy())
    assert f"JURY_EGRESS_ALLOW=127.0.0.1:{allowed.port}" in refusal and len(allowed.seen) == 2


def test_a_redirect_never_carries_the_key_to_another_host(
    servers: tuple[Recorder, Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    allowed, other = servers
    here = f"127.0.0.1:{allowed.port}"
    both = EgressPolicy.build(  # even the redirect's target may be reached: it is not followed
        allow=f"{here} 127.0.0.1:{other.port}", key_hosts={"JURY_TEST_EGRESS_KEY": [here]}
    )
    redirecting = allowed.url("/redirect/v1")
    for http_client in ("jury", "litellm"):
        keyed = Judge(
            model="openai/x",
            api_base=redirecting,
            api_key_env="JURY_TEST_EGRESS_KEY",
            http_client=http_client,
        )
        refusal = judged(keyed, both)
        assert "redirect (HTTP 307)" in refusal and "jury follows no redirect" in refusal
    monkeypatch.setenv("JURY_PLAIN_VARS", "")
    candidate = HTTPCandidate(
        name="bot", url=redirecting, headers={"Authorization": "Bearer ${JURY_TEST_EGRESS_KEY}"}
    )
    answer = LOOP.run(ask_endpoint(candidate, "question?", both))
    assert answer.error_kind == "egress_refused" and "redirect" in answer.text
    batches = Judge(model="openai/x", api_base=redirecting, api_key_env="JURY_TEST_EGRESS_KEY")
    client = BatchClient(Endpoint.of(batches, both))
    with pytest.raises(EgressRefused, match="redirect"):
        client.upload("batch.jsonl", b"{}\n")
    client.close()
    assert allowed.carried(NAMED_KEY)  # the allowed host had it, as listed
    assert other.seen == []  # the redirect's target: not one request, so not one key


def test_a_name_that_resolves_to_loopback_is_judged_by_its_address(
    servers: tuple[Recorder, Recorder],
) -> None:
    allowed, _ = servers
    name = socket.gethostname()
    addresses = {str(info[4][0]) for info in socket.getaddrinfo(name, allowed.port)}
    if not addresses or not all(a.startswith("127.") for a in addresses):
        pytest.skip(f"this machine's name {name} does not resolve to loopback only")
    url = f"http://{name}:{allowed.port}/v1"
    candidate = HTTPCandidate(name="bot", url=f"{url}/answer")
    refused = LOOP.run(ask_endpoint(candidate, "question?", EgressPolicy()))
    assert refused.error_kind == "egress_refused"
    assert f"{name} (at 127." in refused.text and "loopback" in refused.text
    calls = len(allowed.seen)
    assert "refused" in judged(Judge(model="openai/x", api_base=url), EgressPolicy())
    assert len(allowed.seen) == calls
    # Allowed by its address, the request goes to the address checked, named as written.
    answer = LOOP.run(ask_endpoint(candidate, "question?", policy(allowed)))
    assert answer.text == "the internal secret" and answer.error_kind is None
    assert allowed.seen[-1]["host"] == f"{name}:{allowed.port}"
    assert '"score": 4' in judged(Judge(model="openai/x", api_base=url), policy(allowed))


def traced_peak_mib(run: object) -> float:
    """The most memory Python held at once while `run()` ran, in MiB."""
    tracemalloc.start()
    try:
        assert callable(run)
        run()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("client", ["jury", "litellm", "endpoint", "batch_api"])
def test_a_gzip_bomb_is_read_no_further_than_the_bound(
    servers: tuple[Recorder, Recorder], client: str
) -> None:
    """~200 KiB that inflate to 200 MiB: each client path stops at 8 MiB, decoded."""
    allowed, _ = servers
    gzip_bomb()  # compressed once, before the measure
    bomb = allowed.url("/bomb/v1")
    errors: list[str] = []

    def run() -> None:
        if client == "endpoint":
            answer = LOOP.run(ask_endpoint(HTTPCandidate(name="b", url=bomb), "q", policy(allowed)))
            errors.append(f"{answer.error_kind}: {answer.text}")
        elif client == "batch_api":
            endpoint = Endpoint.of(Judge(model="openai/x", api_base=bomb), policy(allowed))
            with pytest.raises(TransientJudgeError) as caught:
                BatchClient(endpoint).retrieve("b1")
            errors.append(f"{caught.value.kind}: {caught.value}")
        else:
            judge = Judge(model="openai/x", api_base=bomb, http_client=client)
            with pytest.raises(TransientJudgeError) as caught:
                LOOP.run(complete(judge, MESSAGES, egress=policy(allowed)))
            errors.append(f"{caught.value.kind}: {caught.value}")

    peak = traced_peak_mib(run)
    assert "larger than 8 MiB" in errors[0], errors
    assert peak < 48, f"{client}: {peak:.0f} MiB held at once"


def write_batch(folder: Path, judges: list[dict[str, object]], **extra: object) -> Path:
    spec = {"judges": judges, "dimensions": ["relevance"], "items": [{"id": "a", "output": "x"}]}
    path = folder / "batch.yaml"
    path.write_text(yaml.safe_dump({**spec, **extra}))
    return path


def test_dry_run_refuses_what_the_workers_would_refuse_in_one_paragraph_each(
    tmp_path: Path,
) -> None:
    batch = write_batch(
        tmp_path,
        [
            {"model": "openai/llama", "api_base": "http://127.0.0.1:8000/v1"},
            {"model": "openai/gpt-4o-mini", "api_key_env": "HOME"},
            {"model": "openai/x", "api_base": "http://2130706433/v1", "name": "odd"},
        ],
    )
    # Jury's defaults: none of the tests' allowances.
    strict = {"JURY_EGRESS_ALLOW": "", "JURY_KEY_HOSTS": "", "COLUMNS": "400"}
    refused = CliRunner().invoke(cli, ["submit", "--dry-run", str(batch)], env=strict)
    assert refused.exit_code == 2, refused.output
    text = " ".join(refused.output.split())
    assert "nothing was enqueued" in text
    assert "judges[0] (openai/llama): api_base: refused by the workers' egress policy" in text
    assert "127.0.0.1 is a loopback address" in text
    assert (
        "set JURY_EGRESS_ALLOW=127.0.0.1:8000 on the workers and where `jury submit` runs" in text
    )
    assert "judges[1] (openai/gpt-4o-mini)" in text and "HOME is not a key variable" in text
    assert "judges[2] (odd)" in text and "unusual way" in text
    assert "Traceback" not in refused.output
    fixed = write_batch(
        tmp_path, [{"model": "openai/llama", "api_base": "http://127.0.0.1:8000/v1"}]
    )
    allowed = {**strict, "JURY_EGRESS_ALLOW": "127.0.0.1:8000"}
    planned = CliRunner().invoke(cli, ["submit", "--dry-run", str(fixed)], env=allowed)
    assert planned.exit_code == 0, planned.output
