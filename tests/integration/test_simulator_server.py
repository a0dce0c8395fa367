"""The simulator as a real server over HTTP (and through LiteLLM)."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jury.local.services import python_module
from tests.simulator_helpers import MESSAGES, REPO_ROOT, SEED, SYSTEM, USER, truth_score

# --- the real server over HTTP ----------------------------------------------------------


@dataclass
class Simulator:
    process: subprocess.Popen[str]
    ready_file: Path
    base_url: str = ""


def start_simulator(tmp: Path, name: str, *args: str) -> Simulator:
    ready_file = tmp / f"{name}.port"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    command = [
        *python_module("jury.simulator"),
        "--port",
        "0",
        "--ready-file",
        str(ready_file),
        *args,
    ]
    stderr = (tmp / f"{name}.stderr").open("w")
    process = subprocess.Popen(
        command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True
    )
    return Simulator(process, ready_file)


def wait_ready(simulator: Simulator, deadline_s: float = 15.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not simulator.ready_file.exists():
        if simulator.process.poll() is not None:
            stderr_path = simulator.ready_file.with_suffix(".stderr")
            pytest.fail(f"simulator exited early: {stderr_path.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail("simulator did not become ready in time")
        time.sleep(0.02)  # Polling interval, not synchronisation: the file is the signal.
    port = int(simulator.ready_file.read_text())
    assert simulator.process.stdout is not None
    assert (
        simulator.process.stdout.readline().strip()
        == f"simulator listening on http://127.0.0.1:{port}"
    )
    simulator.base_url = f"http://127.0.0.1:{port}"


def stop(simulator: Simulator) -> None:
    simulator.process.terminate()
    try:
        simulator.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        simulator.process.kill()
        simulator.process.wait()
    assert simulator.process.stdout is not None
    simulator.process.stdout.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("simulator")
    simulator = start_simulator(
        tmp,
        "main",
        *("--seed", str(SEED), "--model-rpm", "balanced@rl=3", "--model-rpm", "noisy@burst=4"),
        *("--down", "balanced@dead", "--t0-noise", "noisy@t0=1"),
    )
    try:
        wait_ready(simulator)
        yield simulator.base_url
    finally:
        stop(simulator)


FAULTY_SERVERS = {
    "errors": ("--error-rate", "1"),
    "garbage": ("--garbage-rate", "1"),
    "hangs": ("--timeout-rate", "1", "--hang-seconds", "0.6"),
    "tags": ("--formats", "tag", "--latency-ms", "250", "--latency-sigma", "0"),
}


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    tmp = tmp_path_factory.mktemp("faulty")
    # Start all at once so their start-up times overlap.
    simulators = {name: start_simulator(tmp, name, *args) for name, args in FAULTY_SERVERS.items()}
    try:
        for simulator in simulators.values():
            wait_ready(simulator)
        yield {name: simulator.base_url for name, simulator in simulators.items()}
    finally:
        for simulator in simulators.values():
            stop(simulator)


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: Any


def request(url: str, body: dict[str, Any] | None = None, timeout: float = 10.0) -> Reply:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    if body is None and url.endswith("/reset"):
        req.method = "POST"
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            return Reply(response.status, dict(response.headers), json.loads(response.read()))
    except urllib.error.HTTPError as error:
        return Reply(error.code, dict(error.headers), json.loads(error.read()))


def judge(base_url: str, model: str, **extra: Any) -> Reply:
    body = {"model": model, "messages": MESSAGES, "temperature": 0, **extra}
    return request(f"{base_url}/v1/chat/completions", body)


def test_health(server: str) -> None:
    assert request(f"{server}/health").body == {"ok": True}


def test_litellm_completion_parses_score_and_usage(server: str) -> None:
    import litellm

    response = litellm.completion(
        model="openai/balanced",
        api_base=f"{server}/v1",
        api_key="x",
        messages=MESSAGES,
        temperature=0,
        num_retries=0,
    )
    verdict = json.loads(response.choices[0].message.content)
    assert verdict["score"] == truth_score(SEED, "relevance", "4", 1, 5)
    assert verdict["reasoning"]
    usage = response.usage
    assert usage.prompt_tokens == math.ceil(len(SYSTEM + "\n\n" + USER) / 4)
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens > usage.prompt_tokens


def test_unprefixed_path_and_openai_shape(server: str) -> None:
    reply = request(f"{server}/chat/completions", {"model": "strict@judge2", "messages": MESSAGES})
    assert reply.status == 200
    assert reply.body["object"] == "chat.completion" and reply.body["model"] == "strict@judge2"
    choice = reply.body["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["message"]["role"] == "assistant"
    assert 1 <= json.loads(choice["message"]["content"])["score"] <= 5


def test_rpm_limit_answers_429_with_retry_after(server: str) -> None:
    assert [judge(server, "balanced@rl").status for _ in range(3)] == [200, 200, 200]
    refused = judge(server, "balanced@rl")
    assert refused.status == 429
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert refused.body["error"]["type"] == "rate_limit_error"
    assert judge(server, "balanced@other").status == 200  # Other models keep their quota.
    # Each arrival at the limited model is kept with its decision and the client's port.
    arrivals = request(f"{server}/stats/arrivals").body
    assert [admitted for _at, admitted, _port in arrivals["balanced@rl"]] == [1, 1, 1, 0]
    assert all(port > 0 for _at, _admitted, port in arrivals["balanced@rl"])
    assert "balanced@other" not in arrivals  # not limited: not recorded


def test_rpm_limit_is_exact_under_concurrency(server: str) -> None:
    with ThreadPoolExecutor(max_workers=10) as pool:
        statuses = sorted(pool.map(lambda _: judge(server, "noisy@burst").status, range(10)))
    assert statuses == [200] * 4 + [429] * 6


def test_t0_noise_makes_one_model_vary_at_temperature_zero(server: str) -> None:
    def scores(model: str) -> set[int]:
        replies = [judge(server, model).body["choices"][0]["message"]["content"] for _ in range(20)]
        return {json.loads(content)["score"] for content in replies}

    assert scores("noisy") == {truth_score(SEED, "relevance", "4", 1, 5)}  # deterministic
    assert len(scores("noisy@t0")) >= 2  # sd 1.2 points at temperature 0


def test_down_model_answers_503(server: str) -> None:
    reply = judge(server, "balanced@dead")
    assert reply.status == 503 and reply.body["error"]["type"] == "server_error"


def test_unknown_model_answers_404(server: str) -> None:
    reply = judge(server, "gpt-4o")
    assert reply.status == 404
    assert reply.body["error"]["code"] == "model_not_found"
    assert reply.body["error"]["type"] == "invalid_request_error"


def test_prompt_without_criterion_answers_400(server: str) -> None:
    messages = [{"role": "user", "content": "Scale: 1 to 5\n<data-1>x</data-1>"}]
    reply = request(f"{server}/v1/chat/completions", {"model": "balanced", "messages": messages})
    assert reply.status == 400 and "Criterion" in reply.body["error"]["message"]


def test_a_prompt_that_is_not_a_judges_gets_a_written_answer(server: str) -> None:
    """A model under test (a batch's LLM candidate): free text, the same for the same prompt,
    different from another persona's."""
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Pay day?"}]
    first = request(f"{server}/v1/chat/completions", {"model": "balanced", "messages": messages})
    again = request(f"{server}/v1/chat/completions", {"model": "balanced", "messages": messages})
    other = request(f"{server}/v1/chat/completions", {"model": "strict", "messages": messages})
    text = first.body["choices"][0]["message"]["content"]
    assert first.status == 200 and "Pay day?" in text and text.startswith("(balanced)")
    assert again.body["choices"][0]["message"]["content"] == text
    assert other.body["choices"][0]["message"]["content"] != text
    assert first.body["usage"]["completion_tokens"] > 0


def test_stats_count_answers_per_model_and_reset(server: str) -> None:
    judge(server, "lenient@stats")
    judge(server, "lenient@stats")
    judge(server, "nobody@stats")
    stats = request(f"{server}/stats").body
    assert stats["models"]["lenient@stats"]["200"] == 2
    assert stats["models"]["nobody@stats"]["404"] == 1
    assert stats["total"] >= 3 and stats["uptime_s"] > 0
    assert request(f"{server}/stats/reset").body == {"ok": True}
    assert request(f"{server}/stats").body["total"] == 0
    judge(server, "lenient@stats")
    assert request(f"{server}/stats").body["models"] == {
        "lenient@stats": {"200": 1, "garbage": 0, "timeout": 0}
    }


def test_error_rate_answers_5xx(faulty: dict[str, str]) -> None:
    statuses = {judge(faulty["errors"], "balanced").status for _ in range(12)}
    assert statuses <= {500, 502, 503} and len(statuses) >= 2


def test_garbage_rate_answers_unparseable_text(faulty: dict[str, str]) -> None:
    reply = judge(faulty["garbage"], "balanced")
    content = reply.body["choices"][0]["message"]["content"]
    assert reply.status == 200 and not re.search(r"\d", content)
    assert request(f"{faulty['garbage']}/stats").body["models"]["balanced"]["garbage"] == 1


def test_timeout_rate_makes_clients_time_out(faulty: dict[str, str]) -> None:
    body = {"model": "balanced", "messages": MESSAGES}
    with pytest.raises(TimeoutError):
        request(f"{faulty['hangs']}/v1/chat/completions", body, timeout=0.2)
    assert request(f"{faulty['hangs']}/stats").body["models"]["balanced"]["timeout"] == 1


def test_formats_and_latency_with_json_mode_override(faulty: dict[str, str]) -> None:
    started = time.monotonic()
    tagged = judge(faulty["tags"], "balanced").body["choices"][0]["message"]["content"]
    assert time.monotonic() - started >= 0.24  # --latency-ms 250 with sigma 0.
    assert re.fullmatch(r"<Reasoning>.+</Reasoning><Score>\d</Score>", tagged)
    forced = judge(faulty["tags"], "balanced", response_format={"type": "json_object"})
    assert json.loads(forced.body["choices"][0]["message"]["content"])["score"] in range(1, 6)
