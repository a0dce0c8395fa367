"""jury's own HTTP client to OpenAI-compatible servers (jury.worker.calls.openai_wire), over real
HTTP to the simulator, beside LiteLLM's OpenAI SDK client (`http_client: litellm`): the same
answers, usage, rate-limit headers and errors either way, and what the wire adds."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import litellm
import pytest

from jury.errors import PermanentJudgeError, TransientJudgeError
from jury.local.services import ManagedProcess, start_simulator
from jury.schemas.batch import Dimension, Item, Judge
from jury.worker.calls.endpoint_client import MAX_REPLY_BYTES
from jury.worker.calls.llm_client import (
    LLMReply,
    _cost,
    classify_error,
    complete,
    price_unpriced_model,
    uses_wire,
)
from jury.worker.calls.openai_wire import REPORTED_USAGE, _status_error, wire_price
from jury.worker.engine.loop import EventLoopThread
from jury.worker.judging.prompts import build_messages

pytestmark = pytest.mark.integration
MESSAGES = build_messages(Item(id="a", input="2+2?", output="4"), Dimension(name="relevance"))
CLIENTS = ["jury", "litellm"]
LOOP = EventLoopThread("test-openai-wire")


@pytest.fixture(scope="module")
def strict_simulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManagedProcess]:
    """A provider whose one-second bucket holds 2 calls of `balanced`, sending OpenAI's
    rate-limit headers; and a `strict` whose answers are larger than the wire reads."""
    process = start_simulator(
        tmp_path_factory.mktemp("sim"),
        [
            *("--model-rpm", "balanced@jury=120", "--model-rpm", "balanced@litellm=120"),
            *("--rate-window", "1", "--garbage-rate", "0"),
            *("--hostile", "strict=huge-answer"),
            *("--huge-answer-chars", str(MAX_REPLY_BYTES + 1000)),
            *("--latency-ms", "600", "--latency-sigma", "0"),
        ],
    )
    yield process
    process.stop()


def judge(simulator: ManagedProcess, model: str, client: str, **extra: object) -> Judge:
    return Judge.model_validate(
        {"model": model, "api_base": simulator.url, "http_client": client, **extra}
    )


def call(judge: Judge) -> LLMReply:
    return LOOP.run(complete(judge, MESSAGES))


def test_the_wire_is_used_for_an_openai_compatible_server_only() -> None:
    base = "http://127.0.0.1:9/v1"
    assert uses_wire(Judge(model="openai/x", api_base=base))
    assert not uses_wire(Judge(model="openai/x", api_base=base, http_client="litellm"))
    assert not uses_wire(Judge(model="openai/gpt-4o-mini"))  # OpenAI itself: LiteLLM's
    assert not uses_wire(Judge(model="anthropic/claude-3-5-sonnet-20241022", api_base=base))


@pytest.mark.parametrize("client", CLIENTS)
def test_either_client_reads_the_answer_usage_and_rate_limit_headers(
    strict_simulator: ManagedProcess, client: str
) -> None:
    limited = judge(strict_simulator, f"openai/balanced@{client}", client)

    async def three_at_once() -> list[LLMReply | BaseException]:
        calls = (complete(limited, MESSAGES) for _ in range(3))
        return await asyncio.gather(*calls, return_exceptions=True)

    outcomes = LOOP.run(three_at_once())  # the bucket holds two calls a second
    replies = [o for o in outcomes if isinstance(o, LLMReply)]
    refused = [o for o in outcomes if not isinstance(o, LLMReply)]
    assert len(replies) == 2 and len(refused) == 1, outcomes
    for reply in replies:
        assert json.loads(reply.text)["score"] in {1, 2, 3, 4, 5}
        assert reply.prompt_tokens > 100 and reply.completion_tokens > 0
        assert reply.limit_requests == 120 and reply.remaining_requests is not None
        assert reply.reset_requests_s is not None and 0 <= reply.reset_requests_s <= 1.0
    error = refused[0]
    assert isinstance(error, TransientJudgeError) and error.kind == "rate_limited"
    assert error.retry_after is not None and 0 <= error.retry_after <= 1.0


@pytest.mark.parametrize("client", CLIENTS)
def test_either_client_maps_error_statuses_alike(simulator: ManagedProcess, client: str) -> None:
    with pytest.raises(TransientJudgeError) as down:
        call(judge(simulator, "openai/balanced@broken", client))
    assert down.value.kind == "server_error"
    with pytest.raises(PermanentJudgeError) as unknown:
        call(judge(simulator, "openai/no-such-persona", client))
    assert unknown.value.kind == "not_found"
    assert "no-such-persona" in str(unknown.value)


def test_a_refused_connection_is_transient(tmp_path: Path) -> None:
    gone = start_simulator(tmp_path, [])
    url = gone.url
    gone.stop()
    with pytest.raises(TransientJudgeError) as refused:
        call(Judge(model="openai/balanced", api_base=url, timeout_s=5))
    assert refused.value.kind == "connection"


def test_a_reply_larger_than_the_wire_reads_is_refused_not_kept(
    strict_simulator: ManagedProcess,
) -> None:
    with pytest.raises(TransientJudgeError) as huge:
        call(judge(strict_simulator, "openai/strict", "jury", timeout_s=30))
    assert huge.value.kind == "server_error"
    assert "larger than 8 MiB" in str(huge.value)


def test_hundreds_of_calls_are_in_flight_at_once_on_one_loop(
    strict_simulator: ManagedProcess,
) -> None:
    """aiohttp's default pool holds 100 connections: the wire's is not the bound."""
    stats_url = strict_simulator.url.removesuffix("/v1") + "/stats"
    urllib.request.urlopen(urllib.request.Request(stats_url + "/reset", method="POST"))
    lenient = judge(strict_simulator, "openai/balanced@wide", "jury")

    async def many() -> list[LLMReply]:
        return await asyncio.gather(*(complete(lenient, MESSAGES) for _ in range(160)))

    replies = LOOP.run(many())
    assert len(replies) == 160 and all(r.completion_tokens > 0 for r in replies)
    with urllib.request.urlopen(stats_url) as answer:
        assert json.load(answer)["max_in_flight"] >= 150


def test_a_priced_model_behind_the_wire_is_priced_by_its_own_name() -> None:
    """LiteLLM does not know the wire's model name: `openai/gpt-4o-mini` behind a proxy is
    priced by its own, as LiteLLM prices it."""
    prompt_usd, completion_usd = litellm.cost_per_token(
        model="openai/gpt-4o-mini", prompt_tokens=1000, completion_tokens=1000
    )
    assert wire_price("gpt-4o-mini", 1000, 1000) == pytest.approx(prompt_usd + completion_usd)
    assert prompt_usd + completion_usd > 0
    assert wire_price("surely-no-such-model-anywhere", 1000, 1000) is None
    assert price_unpriced_model("openai/a-local-server-model")  # registered at zero: free
    assert wire_price("a-local-server-model", 1000, 1000) == 0.0
    # A server that reported no usage: its tokens estimated, then priced the same way.
    proxied = Judge(model="openai/gpt-4o-mini", api_base="http://127.0.0.1:9/v1")
    assert _cost(proxied, 1000, 1000, None, wired=True) == pytest.approx(
        prompt_usd + completion_usd
    )


def test_the_usage_the_server_reported_reaches_jury_unchanged(
    simulator: ManagedProcess,
) -> None:
    """jury checks the provider's usage itself (jury.worker.calls.usage): the wire hands it over
    as sent, not as LiteLLM's Usage would coerce it."""
    from jury.worker.calls.openai_wire import wire_model

    async def raw() -> object:
        from jury.worker.calls.openai_wire import register_wire

        register_wire()
        return await litellm.acompletion(
            model=wire_model("openai/balanced"),
            api_base=simulator.url,
            api_key="x",
            messages=MESSAGES,
        )

    response = LOOP.run(raw())
    reported = response._hidden_params[REPORTED_USAGE]  # type: ignore[attr-defined]
    assert reported["prompt_tokens"] == response.usage.prompt_tokens > 0  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "bad_request"),
        (401, "auth"),
        (403, "auth"),
        (404, "not_found"),
        (408, "timeout"),
        (418, "bad_request"),
        (422, "bad_request"),
        (429, "rate_limited"),
        (500, "server_error"),
        (502, "server_error"),
        (503, "server_error"),
        (529, "server_error"),
    ],
)
def test_each_error_status_is_the_error_the_sdk_path_gives(status: int, kind: str) -> None:
    """What jury's retry policy sees of an error status: permanent for a request the server
    refuses, transient for its own trouble, with its Retry-After; a hostile body is cut."""
    body = ("<html>" + "x" * 100_000).encode()
    error = classify_error(_status_error(status, body, {"retry-after": "2"}, "m"))
    assert getattr(error, "kind", None) == kind
    permanent = kind in {"bad_request", "auth", "not_found"}
    assert isinstance(error, PermanentJudgeError if permanent else TransientJudgeError)
    assert len(str(error)) <= 500
    if status == 429:
        assert isinstance(error, TransientJudgeError) and error.retry_after == 2.0


def test_litellm_success_logging_runs_only_when_a_callback_would_see_it(
    simulator: ManagedProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no LiteLLM callback the wire claims the call's async success log, and LiteLLM
    neither builds nor runs it; a callback registered the documented way
    (`litellm.callbacks`) still sees every call, with LiteLLM's cost."""
    import time

    from litellm.integrations.custom_logger import CustomLogger
    from litellm.litellm_core_utils.litellm_logging import Logging

    handled: list[object] = []
    original = Logging.async_success_handler

    async def counted(self: Logging, *args: object, **kwargs: object) -> None:
        handled.append(self)
        await original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Logging, "async_success_handler", counted)
    # LiteLLM keeps a callback once seen in the lists it routes callbacks to, after it left
    # `litellm.callbacks` (another test's may be there): none, for this test.
    for registered in ("callbacks", "success_callback", "_async_success_callback"):
        monkeypatch.setattr(litellm, registered, [])
    wired = judge(simulator, "openai/balanced", "jury")
    assert call(wired).completion_tokens > 0
    LOOP.run(asyncio.sleep(0.2))  # a log LiteLLM scheduled would have started by now
    assert handled == []

    class Seen(CustomLogger):
        def __init__(self) -> None:
            super().__init__()
            self.costs: list[object] = []

        async def async_log_success_event(self, kwargs, response_obj, start_time, end_time):  # type: ignore[no-untyped-def]
            self.costs.append(kwargs.get("response_cost"))

    seen = Seen()
    monkeypatch.setattr(litellm, "callbacks", [seen])
    assert call(wired).completion_tokens > 0
    deadline = time.monotonic() + 10
    while not seen.costs and time.monotonic() < deadline:
        LOOP.run(asyncio.sleep(0.05))
    assert seen.costs == [0.0] and len(handled) == 1
