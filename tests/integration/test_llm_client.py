"""The LiteLLM client over real HTTP to the simulator: replies, usage, and provider errors
mapped onto jury's transient/permanent errors (retries are ours, not LiteLLM's)."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import litellm
import pytest
from litellm.integrations.custom_logger import CustomLogger

from jury.errors import PermanentJudgeError, TransientJudgeError
from jury.local.services import ManagedProcess, start_simulator
from jury.schemas.batch import Dimension, Item, Judge
from jury.worker.calls.llm_client import LLMReply, complete, price_unpriced_model, waits_at_send
from jury.worker.engine.loop import EventLoopThread
from jury.worker.judging.judge_calls import RetryPolicy, judge_call, task_messages
from jury.worker.judging.prompts import build_messages
from jury.worker.limits.gating import GatedCall
from jury.worker.limits.ratelimit import Limits, MemoryRateLimiter, Outcome, Permit

pytestmark = pytest.mark.integration
MESSAGES = build_messages(Item(id="a", input="2+2?", output="4"), Dimension(name="relevance"))


@pytest.fixture(scope="module")
def limited_simulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ManagedProcess]:
    process = start_simulator(
        tmp_path_factory.mktemp("sim"),
        [
            "--model-rpm",
            "balanced@limited=2",
            "--garbage-rate",
            "0",
            "--hang-seconds",
            "5",
            "--model-rpm",
            "strict@slow=1000",
        ],
    )
    yield process
    process.stop()


# One long-lived loop, as in a worker process (LiteLLM keeps its HTTP sessions per loop).
LOOP = EventLoopThread("test-llm-client")


def call(judge: Judge, messages: list[dict[str, str]]) -> LLMReply:
    return LOOP.run(complete(judge, messages))


def judge(simulator: ManagedProcess, model: str, **extra: object) -> Judge:
    return Judge.model_validate({"model": model, "api_base": simulator.url, **extra})


def test_reply_has_text_usage_and_latency(simulator: ManagedProcess) -> None:
    reply = call(judge(simulator, "openai/balanced"), MESSAGES)
    assert json.loads(reply.text)["score"] in {1, 2, 3, 4, 5}
    assert reply.prompt_tokens > 100 and reply.completion_tokens > 0
    assert reply.latency_ms > 0 and reply.cost_usd == 0.0  # the simulator has no price


def test_an_unpriced_model_is_registered_free_and_a_priced_one_left_alone(
    simulator: ManagedProcess,
) -> None:
    # LiteLLM searched its whole price map for a match at every call of an unmapped model.
    import litellm

    assert "openai/lenient" not in litellm.model_cost
    reply = call(judge(simulator, "openai/lenient"), MESSAGES)
    assert reply.cost_usd == 0.0
    entry = litellm.model_cost["openai/lenient"]
    assert entry["input_cost_per_token"] == 0.0 and entry["output_cost_per_token"] == 0.0
    assert litellm.completion_cost(model="openai/lenient", prompt="x", completion="y") == 0.0
    assert price_unpriced_model("openai/lenient") is True  # once per process, cached
    priced = litellm.model_cost["gpt-4o-mini"]["input_cost_per_token"]
    assert price_unpriced_model("gpt-4o-mini") is False
    assert litellm.model_cost["gpt-4o-mini"]["input_cost_per_token"] == priced > 0


def test_rate_limit_is_transient_with_retry_after(limited_simulator: ManagedProcess) -> None:
    limited = judge(limited_simulator, "openai/balanced@limited")
    call(limited, MESSAGES)
    call(limited, MESSAGES)
    with pytest.raises(TransientJudgeError) as caught:
        call(limited, MESSAGES)
    assert caught.value.kind == "rate_limited"
    assert caught.value.retry_after is not None and caught.value.retry_after >= 1


def test_server_errors_are_transient_and_unknown_models_permanent(
    simulator: ManagedProcess,
) -> None:
    with pytest.raises(TransientJudgeError) as down:
        call(judge(simulator, "openai/balanced@broken"), MESSAGES)
    assert down.value.kind == "server_error"
    with pytest.raises(PermanentJudgeError) as unknown:
        call(judge(simulator, "openai/no-such-persona"), MESSAGES)
    assert unknown.value.kind == "not_found"


def test_timeout_is_transient(tmp_path: Path) -> None:
    hanging = start_simulator(tmp_path, ["--timeout-rate", "1", "--hang-seconds", "10"])
    try:
        with pytest.raises(TransientJudgeError) as caught:
            call(judge(hanging, "openai/balanced", timeout_s=0.5), MESSAGES)
        assert caught.value.kind in {"timeout", "connection"}
    finally:
        hanging.stop()


def test_missing_key_variable_is_permanent_and_named(simulator: ManagedProcess) -> None:
    keyed = judge(simulator, "openai/balanced", api_key_env="JURY_TEST_SURELY_UNSET_KEY")
    with pytest.raises(PermanentJudgeError, match="JURY_TEST_SURELY_UNSET_KEY"):
        call(keyed, MESSAGES)


def test_garbage_answers_are_retried_then_reported(tmp_path: Path) -> None:
    garbage = start_simulator(tmp_path, ["--garbage-rate", "1"])
    try:
        dimensions = [Dimension(name="relevance")]
        messages = task_messages(Item(id="a", output="4"), dimensions, (None,))
        judged = LOOP.run(
            judge_call(
                judge(garbage, "openai/balanced"),
                dimensions,
                (None,),
                messages,
                0,
                complete,
                RetryPolicy(max_attempts=3, base_delay_s=0),
            )
        )
        result = judged[0].result
        with urllib.request.urlopen(garbage.url.removesuffix("/v1") + "/stats") as answer:
            stats = json.load(answer)
    finally:
        garbage.stop()
    assert result.score is None and result.error_kind == "unparseable" and result.attempts == 3
    assert result.prompt_tokens > 0  # tokens of failed attempts are still counted
    assert stats["total"] == 3


class GateThatMakesTheCallWait(MemoryRateLimiter):
    """The in-memory limiter on the real clock: every slot is free, and the send gate makes
    the call wait twice 0.75 s before letting it pass, recording the pass."""

    def __init__(self, events: list[str]) -> None:
        super().__init__(2.5)
        self.events = events
        self.gaps = [0.75, 0.75]

    def reserve(self, key: str, limits: Limits, tokens: int, token: str) -> Permit:
        return Permit(Outcome.GRANTED, 0.0, token)

    def send_gate(self, key: str, limits: Limits) -> float:
        if self.gaps:
            return self.gaps.pop()
        self.events.append("send gate passed")
        return 0.0


class PreCallLog(CustomLogger):
    """LiteLLM's pre-call log: LiteLLM has built the request and is about to send it."""

    def __init__(self, events: list[str]) -> None:
        super().__init__()
        self.events = events

    def log_pre_api_call(self, model: str, messages: object, kwargs: object) -> None:
        self.events.append("litellm built the request")


def test_the_send_gate_is_passed_at_the_http_send(simulator: ManagedProcess) -> None:
    """The send gate spaces calls where the provider counts them: it is passed in the HTTP
    client's request hook, after LiteLLM's own work on the call (which, on a starved event
    loop, would otherwise bunch calls that passed the gate evenly). Its wait is not the call's
    time: 1.5 s at the gate does not use up timeout_s=1."""
    events: list[str] = []
    logger = PreCallLog(events)
    litellm.callbacks.append(logger)
    try:
        gated = GatedCall(
            complete, GateThatMakesTheCallWait(events), 2.5, waits_at_send=waits_at_send
        )
        slow_gate = judge(simulator, "openai/balanced", rpm=600, timeout_s=1)
        reply = LOOP.run(gated(slow_gate, MESSAGES))
    finally:
        litellm.callbacks.remove(logger)
    assert json.loads(reply.text)["score"] in {1, 2, 3, 4, 5}
    assert events == ["litellm built the request", "send gate passed"]
    assert reply.latency_ms < 1000  # measured from the send, not from the gate


def test_a_warmed_up_worker_s_first_call_imports_next_to_nothing(
    simulator: ManagedProcess,
) -> None:
    """The OpenAI SDK imports its ~470 resource modules at its first request, and LiteLLM
    loads its tokenizer (tiktoken's cl100k_base, 0.13 s of CPU) at a custom provider's first
    call: a worker warms up at its start, so that a batch's first judgments do not wait."""
    code = (
        "import asyncio, sys\n"
        "from jury.schemas.batch import Judge\n"
        "from jury.worker.calls.llm_client import complete, warm_up\n"
        "warm_up()\n"
        "before = set(sys.modules)\n"
        f"judge = Judge(model='openai/balanced', api_base={simulator.url!r})\n"
        f"asyncio.run(complete(judge, {MESSAGES!r}))\n"
        "print(' '.join(sorted(set(sys.modules) - before)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    imported = done.stdout.split("\n")[-2].split()
    assert len(imported) < 100  # without warm_up(): about 500
    assert not [name for name in imported if "encoding" in name or "tiktoken" in name]
