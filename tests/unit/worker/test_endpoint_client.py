"""An HTTP endpoint candidate's every failure becomes its answer, marked by kind; secrets in
its URL and headers never reach the text stored."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from jury.schemas.candidates import HTTPCandidate
from jury.worker.calls.endpoint_client import ask_endpoint

REPLIES = {
    "/ok": (200, b'{"out": [{"text": "Ten days."}]}'),
    "/html": (200, b"<html>not json</html>"),
    "/empty": (200, b'{"out": []}'),
    "/down": (503, b"maintenance"),
    "/deep": (200, b"[" * 200_000),
}
# Replies sent in chunks: (chunk, how many, pause between them).
STREAMED = {
    "/trickle": (b" ", 600, 0.05),  # a byte every 50 ms: each read is quick, the whole is not
    "/huge": (b"x" * 65536, 200, 0.0),  # 12.5 MiB
}


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append(dict(self.headers))
            if self.path == "/slow":
                time.sleep(1.0)
            if self.path in STREAMED:
                self._stream(*STREAMED[self.path])
                return
            status, body = REPLIES.get(self.path, (200, b"{}"))
            try:
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (the timeout case)

        def _stream(self, chunk: bytes, chunks: int, pause_s: float) -> None:
            try:
                self.send_response(200)
                self.send_header("Content-Length", str(len(chunk) * chunks))
                self.end_headers()
                for _ in range(chunks):
                    self.wfile.write(chunk)
                    self.wfile.flush()
                    time.sleep(pause_s)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client stopped reading: what the test wants

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    httpd.shutdown()
    httpd.server_close()


def ask(url: str, **extra: object) -> tuple[str, str | None]:
    candidate = HTTPCandidate.model_validate(
        {"name": "bot", "url": url, "answer_path": "out[0].text", "timeout_s": 10, **extra}
    )
    answer = asyncio.run(ask_endpoint(candidate, "How many days?"))
    return answer.text, answer.error_kind


def test_failures_are_answers(server: tuple[str, list[dict[str, str]]]) -> None:
    base, _ = server
    assert ask(f"{base}/ok") == ("Ten days.", None)
    text, kind = ask(f"{base}/down")
    assert kind == "http_503" and text == "[ERROR http_503] HTTP 503: maintenance"
    text, kind = ask(f"{base}/html")
    assert kind == "bad_json" and "not JSON" in text
    text, kind = ask(f"{base}/empty")
    assert kind == "missing_answer" and "out.0" in text
    text, kind = ask(f"{base}/slow", timeout_s=0.3)
    assert kind == "timeout" and "timeout_s=0.3" in text
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    text, kind = ask(f"http://127.0.0.1:{closed}/x")
    assert kind == "connection" and text.startswith("[ERROR connection]")


def test_placeholders_are_expanded_at_the_call_and_kept_out_of_errors(
    server: tuple[str, list[dict[str, str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, seen = server
    monkeypatch.setenv("BOT_TOKEN", "s3cret-token-value")
    monkeypatch.setenv("BOT_BASE", base)
    # The egress policy: the base and host are no secret; the token may go to loopback.
    monkeypatch.setenv("JURY_PLAIN_VARS", "BOT_BASE BOT_HOST")
    monkeypatch.setenv("JURY_KEY_HOSTS", '{"BOT_TOKEN": ["loopback"]}')
    text, kind = ask("${BOT_BASE}/ok", headers={"Authorization": "Bearer ${BOT_TOKEN}"})
    assert (text, kind) == ("Ten days.", None)
    assert seen[-1]["Authorization"] == "Bearer s3cret-token-value"
    monkeypatch.delenv("BOT_BASE")
    text, kind = ask("${BOT_BASE}/ok")
    assert kind == "missing_env" and "BOT_BASE" in text
    monkeypatch.setenv("BOT_HOST", "s3cret-host-value.invalid")
    text, kind = ask("http://${BOT_HOST}/x")
    assert kind == "connection" and "s3cret-host-value" not in text
    monkeypatch.setenv("JURY_PLAIN_VARS", "")  # now a secret: it may not go into a URL
    text, kind = ask("http://${BOT_HOST}/x")
    assert kind == "egress_refused" and "JURY_PLAIN_VARS" in text
    assert "s3cret-host-value" not in text


def test_the_body_is_the_template_with_the_input() -> None:
    candidate = HTTPCandidate.model_validate({"name": "b", "url": "http://h", "body": None})
    assert candidate.body is None
    default = HTTPCandidate.model_validate({"name": "b", "url": "http://h"})
    assert json.dumps(default.body) == '{"input": "{{input}}"}'


def test_a_hostile_endpoint_is_bounded_in_time_and_memory(
    server: tuple[str, list[dict[str, str]]],
) -> None:
    """A reply that trickles ends at the call's timeout_s, not at the last byte; a reply too
    large is read no further than the limit; JSON nested past what Python parses is not
    JSON. Each is a failed answer, never a raise."""
    base, _ = server
    started = time.monotonic()
    text, kind = ask(f"{base}/trickle", timeout_s=0.3)
    assert kind == "timeout" and "timeout_s=0.3" in text
    assert time.monotonic() - started < 10  # the trickle alone lasts 30 s
    text, kind = ask(f"{base}/huge", timeout_s=30)
    assert kind == "too_large" and "larger than 8 MiB" in text
    text, kind = ask(f"{base}/deep")
    assert kind == "bad_json" and text.startswith("[ERROR bad_json] the reply is not JSON: [[[")
