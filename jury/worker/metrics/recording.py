"""A worker process's own metrics: its LLM calls (every judge and candidate call passes
jury.worker.limits.gating.GatedCall, which holds the hooks), the verdicts it stored and the
tasks it queued again. docs/monitoring.md says what each one means.

Nothing is recorded until `switch_on` (a worker with JURY_METRICS_PORT set:
jury.worker.metrics.serving); off, a hook costs a global's read. On, a call costs a few
microseconds of recording (bench/throughput measures it against the CPU of a judgment).

Labels are bounded: `model` (a batch names it, so a process keeps at most MAX_MODELS of them,
each cut to MAX_LABEL_CHARS; the rest are counted as `other`), `outcome`, `kind` and `reason`
(jury's own words). Never an item, a sample or a batch: a batch's spend is the exporter's
(jury.worker.metrics.fleet), for running batches only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable
from contextlib import AbstractContextManager, nullcontext, suppress
from types import TracebackType
from typing import Any, TypeVar

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)

from jury.errors import JudgeCallError, JuryError
from jury.schemas.batch import Judge
from jury.worker.judging.judge_calls import ReplyLike
from jury.worker.limits.budget import BudgetRefused

MAX_MODELS = 64
MAX_LABEL_CHARS = 100
OTHER_MODEL = "other"

OK = "ok"
RATE_LIMITED = "429"
TIMEOUT = "timeout"
ERROR = "error"
REFUSED = "refused"
OUTCOMES = (OK, RATE_LIMITED, TIMEOUT, ERROR, REFUSED)
# Why a task parked before its first call: every in-flight slot was taken, or its rate-limit
# slot lay beyond the horizon (or a 429's cool-down ran).
PARKED_IN_LINE = "in_flight"
PARKED_FOR_SLOT = "slot"
# Why tasks were queued again (jury.worker.engine.liveness, jury.worker.engine.watchdog).
DEAD_WORKER = "dead_worker"
ORPHAN = "orphan"
LOST = "lost"

# Seconds: a local model answers in tens of milliseconds, a provider's long answer in a
# minute (the default timeout_s is 60).
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
# Seconds: a slot is waited for on the loop up to the horizon (JURY_RATE_HORIZON, 6 s).
SLOT_WAIT_BUCKETS = (0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 6.0, 10.0, 30.0)

R = TypeVar("R", bound=ReplyLike)


def call_outcome(exc: BaseException | None) -> str | None:
    """What a call came to; None where it was no call: the task parks before it
    (jury.worker.limits.gating.Deferred, a JuryError) or is cancelled."""
    if exc is None:
        return OK
    if isinstance(exc, JudgeCallError):
        if not exc.transient:  # the operator's policy, a missing key, the provider's 4xx
            return REFUSED
        if exc.kind == "rate_limited":
            return RATE_LIMITED
        return TIMEOUT if exc.kind == "timeout" else ERROR
    if isinstance(exc, BudgetRefused):
        return REFUSED
    if isinstance(exc, JuryError) or not isinstance(exc, Exception):
        return None
    return ERROR


def failure_kind(exc: BaseException) -> str:
    """jury's word for a failure (jury.errors' kinds), bounded by the code that raises it."""
    if isinstance(exc, JudgeCallError):
        return exc.kind[:MAX_LABEL_CHARS]
    return "budget" if isinstance(exc, BudgetRefused) else "internal"


class _Timer:
    """Observes the seconds its block took into a histogram, if the block ended normally;
    a block left by a JuryError (the task parks: gating.Deferred) counts a park instead."""

    __slots__ = ("_model", "_started")

    def __init__(self, model: _ModelSeries) -> None:
        self._model = model
        self._started = 0.0

    def __enter__(self) -> None:
        self._started = time.perf_counter()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, _: TracebackType | None
    ) -> None:
        if exc is None:
            self._model.slot_wait.observe(time.perf_counter() - self._started)
        elif isinstance(exc, JuryError):
            self._model.parked(PARKED_IN_LINE if getattr(exc, "line", "") else PARKED_FOR_SLOT)


class _Flying:
    """A call in flight for the length of its block."""

    __slots__ = ("_gauge",)

    def __init__(self, gauge: Any) -> None:
        self._gauge = gauge

    def __enter__(self) -> None:
        self._gauge.inc()

    def __exit__(self, *_: object) -> None:
        self._gauge.dec()


class _ModelSeries:
    """One model's children of every labelled metric, looked up once."""

    def __init__(self, metrics: WorkerMetrics, model: str) -> None:
        self.metrics = metrics
        self.model = model
        self.calls = {outcome: metrics.calls.labels(model, outcome) for outcome in OUTCOMES}
        self.latency = metrics.latency.labels(model)
        self.prompt_tokens = metrics.prompt_tokens.labels(model)
        self.completion_tokens = metrics.completion_tokens.labels(model)
        self.cost = metrics.cost.labels(model)
        self.slot_wait = metrics.slot_wait.labels(model)
        self.flying = _Flying(metrics.in_flight.labels(model))
        self.limits: tuple[int | None, ...] = ()

    def parked(self, reason: str) -> None:
        self.metrics.parked.labels(self.model, reason).inc()

    def set_limits(self, judge: Judge) -> None:
        limits = (judge.rpm, judge.tpm, judge.max_in_flight)
        if limits == self.limits:
            return
        self.limits = limits
        for name, value in zip(("rpm", "tpm", "max_in_flight"), limits, strict=True):
            if value:
                self.metrics.limit.labels(self.model, name).set(value)
            else:
                with suppress(KeyError):
                    self.metrics.limit.remove(self.model, name)

    def failed(self, exc: BaseException) -> None:
        outcome = call_outcome(exc)
        if outcome is not None:
            self.calls[outcome].inc()
            self.metrics.failures.labels(self.model, failure_kind(exc)).inc()

    def answered(self, reply: ReplyLike) -> None:
        self.calls[OK].inc()
        self.latency.observe(reply.latency_ms / 1000)
        self.prompt_tokens.inc(reply.prompt_tokens)
        self.completion_tokens.inc(reply.completion_tokens)
        self.cost.inc(reply.cost_usd)
        # The provider's own count of its request window, where its headers gave one.
        limit = getattr(reply, "limit_requests", None)
        if limit is not None:
            self.metrics.provider_limit.labels(self.model).set(limit)
            remaining = getattr(reply, "remaining_requests", None)
            if remaining is not None:
                self.metrics.provider_remaining.labels(self.model).set(remaining)


class WorkerMetrics:
    """The metrics of one worker process, on `registry`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

        def counter(name: str, text: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(name, text, labels, registry=registry)

        def gauge(name: str, text: str, labels: tuple[str, ...]) -> Gauge:
            return Gauge(name, text, labels, registry=registry)

        self.calls = counter(
            "jury_calls",
            "LLM calls by model and outcome (ok, 429, timeout, error, refused)",
            ("model", "outcome"),
        )
        self.failures = counter(
            "jury_call_failures", "Failed calls by model and jury's error kind", ("model", "kind")
        )
        self.latency = Histogram(
            "jury_call_latency_seconds",
            "Answered calls: seconds from the send to the whole answer",
            ("model",),
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.prompt_tokens = counter(
            "jury_call_prompt_tokens", "Prompt tokens of answered calls", ("model",)
        )
        self.completion_tokens = counter(
            "jury_call_completion_tokens", "Completion tokens of answered calls", ("model",)
        )
        self.cost = counter("jury_call_cost_usd", "What answered calls cost, in USD", ("model",))
        self.in_flight = gauge(
            "jury_calls_in_flight", "Calls sent and not yet answered", ("model",)
        )
        self.slot_wait = Histogram(
            "jury_slot_wait_seconds",
            "Seconds a call waited on the event loop for its rate-limit slot",
            ("model",),
            buckets=SLOT_WAIT_BUCKETS,
            registry=registry,
        )
        self.parked = counter(
            "jury_calls_parked",
            "Tasks parked before their first call: no slot within the horizon (slot), or "
            "every in-flight slot taken (in_flight)",
            ("model", "reason"),
        )
        self.limit = gauge(
            "jury_model_limit",
            "A judge's own limit (rpm, tpm, max_in_flight), as its latest call here set it",
            ("model", "limit"),
        )
        self.provider_limit = gauge(
            "jury_provider_requests_limit",
            "The provider's request quota, from its latest answer's rate-limit headers",
            ("model",),
        )
        self.provider_remaining = gauge(
            "jury_provider_requests_remaining",
            "Requests left in the provider's window, from its latest answer's headers",
            ("model",),
        )
        self.verdicts = counter("jury_verdicts_stored", "Cell verdicts this process stored")
        self.requeued = counter(
            "jury_tasks_requeued",
            "Tasks queued again: a dead worker's (dead_worker), fetched by a worker that died "
            "before listing them (orphan), lost in Redis (lost)",
            ("reason",),
        )
        for reason in (DEAD_WORKER, ORPHAN, LOST):
            self.requeued.labels(reason)  # at zero from the start: rate() sees the first one
        self._models: dict[str, _ModelSeries] = {}
        self._other: _ModelSeries | None = None
        self._lock = threading.Lock()

    def model(self, name: str) -> _ModelSeries:
        """The series of a model, made at its first call; past MAX_MODELS models in this
        process, the others share `other` (a hostile batch cannot grow the series)."""
        series = self._models.get(name)
        if series is not None:
            return series
        with self._lock:
            if name in self._models:
                return self._models[name]
            if len(self._models) < MAX_MODELS:
                series = self._models[name] = _ModelSeries(self, name[:MAX_LABEL_CHARS])
                return series
            if self._other is None:
                self._other = _ModelSeries(self, OTHER_MODEL)
            return self._other

    async def watch(self, judge: Judge, call: Awaitable[R]) -> R:
        model = self.model(judge.model)
        model.set_limits(judge)
        try:
            reply = await call
        except BaseException as exc:
            model.failed(exc)
            raise
        model.answered(reply)
        return reply


_metrics: WorkerMetrics | None = None
_NOTHING: AbstractContextManager[None] = nullcontext()


def switch_on(registry: CollectorRegistry = REGISTRY) -> WorkerMetrics:
    """Record from now on, on `registry` (again on the same registry: the same metrics)."""
    global _metrics
    if _metrics is None or _metrics.registry is not registry:
        disable_created_metrics()  # no `_created` series beside each counter: half the series
        _metrics = WorkerMetrics(registry)
    return _metrics


def switch_off() -> None:
    """Record nothing any more (the metrics keep their values on their registry)."""
    global _metrics
    _metrics = None


def watch_call(judge: Judge, call: Awaitable[R]) -> Awaitable[R]:
    """The call, its outcome, latency, tokens and cost recorded (off: the call itself)."""
    metrics = _metrics
    return call if metrics is None else metrics.watch(judge, call)


def slot_waited(judge: Judge) -> AbstractContextManager[None]:
    """Around a call's wait for its rate-limit slot: the seconds waited, or the park."""
    metrics = _metrics
    return _NOTHING if metrics is None else _Timer(metrics.model(judge.model))


def in_flight(judge: Judge) -> AbstractContextManager[None]:
    """Around the call itself: counted in flight while it lasts."""
    metrics = _metrics
    return _NOTHING if metrics is None else metrics.model(judge.model).flying


def verdicts_stored(count: int) -> None:
    if _metrics is not None and count:
        _metrics.verdicts.inc(count)


def tasks_requeued(reason: str, count: int) -> None:
    if _metrics is not None and count:
        _metrics.requeued.labels(reason).inc(count)
