"""A worker's own metrics, recorded by the gated call (jury.worker.metrics.recording): every
outcome counted once under its model, tokens, cost and latency of answered calls, parks, calls
in flight, bounded labels; and nothing at all while switched off."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from prometheus_client import CollectorRegistry

from jury.broker.budget import MeterReading
from jury.errors import ConfigurationError, PermanentJudgeError, TransientJudgeError
from jury.schemas.batch import Judge
from jury.settings import Settings
from jury.worker.judging.judge_calls import ReplyLike
from jury.worker.limits.budget import BudgetRefused
from jury.worker.limits.gating import Deferred, GatedCall, rate_key
from jury.worker.limits.ratelimit import Limits, MemoryRateLimiter
from jury.worker.metrics import recording
from jury.worker.metrics.serving import serve, serve_worker_metrics
from tests.conftest import FakeClock

HORIZON = 2.5
MESSAGES = [{"role": "user", "content": "x"}]


@dataclass(frozen=True)
class Reply:
    text: str = '{"score": 3}'
    prompt_tokens: int = 120
    completion_tokens: int = 30
    cost_usd: float = 0.25
    latency_ms: float = 400.0
    limit_requests: int | None = 600
    remaining_requests: int | None = 17


@pytest.fixture
def registry() -> Iterator[CollectorRegistry]:
    registry = CollectorRegistry()
    recording.switch_on(registry)
    yield registry
    recording.switch_off()


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    found = registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


async def no_sleep(seconds: float) -> None:
    return None


def gated(outcome: Reply | BaseException) -> GatedCall:
    async def call(judge: Judge, messages: list[dict[str, str]]) -> ReplyLike:
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    limiter = MemoryRateLimiter(HORIZON, clock=FakeClock())
    return GatedCall(call, limiter, HORIZON, sleep=no_sleep)


def run(call: GatedCall, judge: Judge) -> None:
    with contextlib.suppress(Exception):
        asyncio.run(call(judge, MESSAGES))


def test_every_outcome_is_counted_once_under_its_model(registry: CollectorRegistry) -> None:
    judge = Judge(model="openai/counted", rpm=600, tpm=100_000)
    outcomes: list[Reply | BaseException] = [
        Reply(),
        Reply(),
        TransientJudgeError("429", kind="rate_limited", retry_after=1.0),
        TransientJudgeError("slow", kind="timeout"),
        TransientJudgeError("reset", kind="connection"),
        PermanentJudgeError("401", kind="auth"),
        # The operator's egress policy refuses with a non-retryable error of its own kind.
        PermanentJudgeError("not on the list", kind="egress_refused"),
    ]
    for outcome in outcomes:
        run(gated(outcome), judge)
    model = judge.model
    counts = {
        o: value(registry, "jury_calls_total", model=model, outcome=o) for o in recording.OUTCOMES
    }
    assert counts == {"ok": 2, "429": 1, "timeout": 1, "error": 1, "refused": 2}
    kinds = ("rate_limited", "timeout", "connection", "auth", "egress_refused")
    assert all(value(registry, "jury_call_failures_total", model=model, kind=k) == 1 for k in kinds)
    # Tokens, cost and latency of the answered calls only.
    assert value(registry, "jury_call_prompt_tokens_total", model=model) == 240
    assert value(registry, "jury_call_completion_tokens_total", model=model) == 60
    assert value(registry, "jury_call_cost_usd_total", model=model) == pytest.approx(0.5)
    assert value(registry, "jury_call_latency_seconds_count", model=model) == 2
    assert value(registry, "jury_call_latency_seconds_sum", model=model) == pytest.approx(0.8)
    assert value(registry, "jury_call_latency_seconds_bucket", model=model, le="0.5") == 2
    assert value(registry, "jury_call_latency_seconds_bucket", model=model, le="0.25") == 0
    # Every call waited for its slot (here: not at all) and none is in flight any more.
    assert value(registry, "jury_slot_wait_seconds_count", model=model) == len(outcomes)
    assert value(registry, "jury_calls_in_flight", model=model) == 0
    assert value(registry, "jury_model_limit", model=model, limit="rpm") == 600
    assert value(registry, "jury_model_limit", model=model, limit="tpm") == 100_000
    assert (
        registry.get_sample_value("jury_model_limit", {"model": model, "limit": "max_in_flight"})
        is None
    )
    assert value(registry, "jury_provider_requests_limit", model=model) == 600
    assert value(registry, "jury_provider_requests_remaining", model=model) == 17


def test_a_call_is_in_flight_while_it_lasts(registry: CollectorRegistry) -> None:
    judge = Judge(model="openai/flying")
    seen: list[float] = []

    async def call(judge: Judge, messages: list[dict[str, str]]) -> ReplyLike:
        seen.append(value(registry, "jury_calls_in_flight", model=judge.model))
        return Reply()

    limiter = MemoryRateLimiter(HORIZON, clock=FakeClock())
    asyncio.run(GatedCall(call, limiter, HORIZON, sleep=no_sleep)(judge, MESSAGES))
    assert seen == [1] and value(registry, "jury_calls_in_flight", model=judge.model) == 0


def test_a_task_that_parks_is_counted_as_parked_not_as_a_call(
    registry: CollectorRegistry,
) -> None:
    """A first call whose slot lies beyond the horizon parks its task: nothing was sent."""
    judge = Judge(model="openai/parked", rpm=60)
    limiter = MemoryRateLimiter(HORIZON, clock=FakeClock())
    for i in range(3):  # fill the horizon
        limiter.reserve(rate_key(judge), Limits(rpm=60), 1, f"f{i}")
    call = GatedCall(lambda j, m: asyncio.sleep(0, Reply()), limiter, HORIZON, sleep=no_sleep)
    with pytest.raises(Deferred):
        asyncio.run(call(judge, MESSAGES))
    assert value(registry, "jury_calls_parked_total", model=judge.model, reason="slot") == 1
    assert (
        sum(
            value(registry, "jury_calls_total", model=judge.model, outcome=o)
            for o in recording.OUTCOMES
        )
        == 0
    )
    assert value(registry, "jury_slot_wait_seconds_count", model=judge.model) == 0

    busy = Judge(model="openai/busy", max_in_flight=1)
    limiter.reserve(rate_key(busy), Limits(max_in_flight=1), 1, "holder")
    with pytest.raises(Deferred):
        asyncio.run(
            GatedCall(lambda j, m: asyncio.sleep(0, Reply()), limiter, HORIZON)(busy, MESSAGES)
        )
    assert value(registry, "jury_calls_parked_total", model=busy.model, reason="in_flight") == 1


def test_outcomes_of_what_a_gated_call_can_raise() -> None:
    refused = BudgetRefused("b1", MeterReading(1.0, 0.0, 1.0))
    assert recording.call_outcome(refused) == "refused"
    assert recording.failure_kind(refused) == "budget"
    assert recording.call_outcome(Deferred(3.0)) is None  # the task parks: no call
    assert recording.call_outcome(asyncio.CancelledError()) is None
    assert recording.call_outcome(RuntimeError("our bug")) == "error"
    assert recording.failure_kind(RuntimeError("our bug")) == "internal"


def test_a_batch_cannot_grow_the_model_labels_without_bound(registry: CollectorRegistry) -> None:
    metrics = recording.switch_on(registry)
    assert metrics.model("openai/" + "x" * 500).model == ("openai/" + "x" * 500)[:100]
    for n in range(recording.MAX_MODELS + 10):
        run(gated(Reply()), Judge(model=f"openai/m{n}"))
    models = {
        sample.labels["model"]
        for family in registry.collect()
        if family.name == "jury_calls"
        for sample in family.samples
    }
    assert len(models) == recording.MAX_MODELS + 1  # the long one's too: made at first sight
    assert "other" in models
    assert value(registry, "jury_calls_total", model="other", outcome="ok") == 11
    assert all(len(m) <= recording.MAX_LABEL_CHARS for m in models)


def test_switched_off_nothing_is_recorded() -> None:
    registry = CollectorRegistry()
    recording.switch_on(registry)
    recording.switch_off()
    judge = Judge(model="openai/off", rpm=600)
    run(gated(Reply()), judge)
    recording.verdicts_stored(3)
    recording.tasks_requeued(recording.DEAD_WORKER, 2)
    assert value(registry, "jury_calls_total", model=judge.model, outcome="ok") == 0
    assert value(registry, "jury_verdicts_stored_total") == 0
    assert value(registry, "jury_tasks_requeued_total", reason="dead_worker") == 0
    # Off, the call is handed back as it is: no wrapper on the hot path.
    coroutine = asyncio.sleep(0, Reply())
    assert recording.watch_call(judge, coroutine) is coroutine
    coroutine.close()


def test_verdicts_and_requeued_tasks_are_counted(registry: CollectorRegistry) -> None:
    recording.verdicts_stored(3)
    recording.verdicts_stored(0)
    recording.tasks_requeued(recording.DEAD_WORKER, 2)
    recording.tasks_requeued(recording.LOST, 5)
    assert value(registry, "jury_verdicts_stored_total") == 3
    assert value(registry, "jury_tasks_requeued_total", reason="dead_worker") == 2
    assert value(registry, "jury_tasks_requeued_total", reason="lost") == 5
    assert value(registry, "jury_tasks_requeued_total", reason="orphan") == 0


def _taken_port() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def test_a_worker_takes_the_first_free_port_of_its_range() -> None:
    with _taken_port() as taken:
        first = taken.getsockname()[1]
        ports = range(first, first + 1)
        with pytest.raises(ConfigurationError, match="no free port for metrics in"):
            serve(ports, "127.0.0.1", CollectorRegistry())
        for candidate in range(first + 1, min(first + 50, 65535)):
            try:
                server, port = serve(range(first, candidate + 1), "127.0.0.1", CollectorRegistry())
            except ConfigurationError:
                continue  # taken by someone else: widen the range
            server.shutdown()
            server.server_close()
            assert port == candidate
            break
        else:
            pytest.fail("no free port near the taken one")


def test_an_address_not_of_this_host_is_one_paragraph() -> None:
    with pytest.raises(ConfigurationError, match="JURY_METRICS_ADDRESS"):
        serve(range(9464, 9465), "192.0.2.1", CollectorRegistry())


def test_no_port_no_metrics() -> None:
    assert serve_worker_metrics(Settings()) is None
    coroutine = asyncio.sleep(0, Reply())
    assert recording.watch_call(Judge(model="openai/x"), coroutine) is coroutine
    coroutine.close()


@pytest.mark.parametrize("port", ["70000", "9470-9464", "nine", "0-5", "1-2-3"])
def test_a_bad_metrics_port_is_refused_in_words(port: str) -> None:
    with pytest.raises(ValueError, match=r"a port \(1-65535\), a range of ports like 9464-9471"):
        Settings.from_env({"JURY_METRICS_PORT": port})


def test_metrics_ports_from_the_environment() -> None:
    assert list(Settings.from_env({"JURY_METRICS_PORT": "9464"}).metrics_ports) == [9464]
    ranged = Settings.from_env({"JURY_METRICS_PORT": "9464-9467"})
    assert list(ranged.metrics_ports) == [9464, 9465, 9466, 9467]
    assert not Settings.from_env({"JURY_METRICS_PORT": "0"}).metrics_ports
    assert not Settings.from_env({}).metrics_ports
