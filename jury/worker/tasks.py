"""The Celery tasks: thin adapters from JSON arguments to the pipeline and the callback.

- `jury.judge_sample(batch, item, dimension, judge, sample)`: one judge task
  (jury.worker.judging.pipeline). Its result is the score it stored (a score per dimension for a
  combined task); a task whose sample was stored as failed ends in FAILURE with the error's
  kind and message (an expected error: logged without a traceback, acknowledged, never
  redelivered); a task that must wait is parked (jury.broker.parking) and ends this delivery in
  RETRY, holding nothing.
- `jury.aggregate_cell(batch, item, dimension)`: a cell's chord callback
  (jury.worker.judging.cell_verdict); its result is the verdict's final score and consensus.
- `jury.generate_output(batch, item, candidate)`: one candidate's answer to one item's input,
  then the item's judge tasks once its last candidate has answered (jury.worker.judging.generation).

A message is input: each body reads its arguments first (jury.schemas.task_messages), and the
pipeline checks them against the batch as stored (jury.worker.judging.message_checks). A message
that does not fit ends in FAILURE with MessageRefused, an expected error: one log line, no
traceback, acknowledged and never redelivered; nothing is called, paid or stored.

Each task has an async body (`engine_body`) that jury's engine pool (jury.worker.engine.pool) runs
on
the worker's event loop; the task function itself only hands the body's outcome to Celery's
tracer. Under another pool (threads, prefork, solo) the task function runs the body itself.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from celery import Celery, Task
from celery.exceptions import Retry

from jury.broker.redis_client import outage
from jury.errors import JudgmentFailed, JuryError, MessageRefused
from jury.schemas.task_messages import cell_message, generation_message, judge_message
from jury.schemas.tasks import AGGREGATE_TASK, GENERATE_TASK, JUDGE_TASK, CellRef, SampleRef
from jury.settings import judge_lanes
from jury.worker.engine.pool import OUTCOMES
from jury.worker.judging.cell_verdict import CellIncomplete, Outcome, aggregate_cells
from jury.worker.judging.generation import generate_task
from jury.worker.judging.pipeline import (
    SamplesNotStored,
    StoreNotRead,
    TaskOutcome,
    judge_task,
)
from jury.worker.limits.gating import Deferred
from jury.worker.runtime import WorkerRuntime

log = logging.getLogger("jury.worker")
# A cell's callback waits this long for others to aggregate with it (jury.worker.engine.grouping):
# callbacks come one per several judge tasks, so alone they met in groups of about two
# (bench/throughput), each group paying its own reads, transaction and progress update; with
# 0.1 s, groups of four to six, but under a strict quota (bench/ratelimit: five cells a
# second, shared by the workers) one or two. A verdict written 0.5 s later changes nothing
# for anyone, and none waits once this worker has no judge task calling: a batch's last
# verdicts go at once.
AGGREGATE_LINGER_S = 0.5
AGGREGATE_FILL = 64
# Samples the store refused (the database is down or locked) are parked with the task and
# stored later, never judged twice: this often, backing off to a minute.
STORE_MAX_RETRIES = 30


def store_retry_delay(retries: int) -> int:
    """Seconds before the store is tried again after `retries` failures: doubling from one,
    at most a minute (the one backoff of a task the store refused, judge or callback)."""
    return min(60, 2**retries)


@dataclass(frozen=True)
class Parked:
    """The task was parked: this delivery ends in RETRY and is acknowledged."""

    reason: str
    delay_s: float


def task_result(outcome: TaskOutcome) -> Any:
    """What Flower and the log show for a judge task; a JudgmentFailed for a failure."""
    if outcome.skipped is not None:
        return {"skipped": outcome.skipped}
    failed = [s for s in outcome.samples if not s.result.ok]
    if failed:
        first = failed[0].result
        kinds = sorted({s.result.error_kind or "error" for s in failed})
        where = "" if len(outcome.samples) == 1 else f"{len(failed)} of {len(outcome.samples)} "
        return JudgmentFailed(
            f"{where}{', '.join(kinds)} after {first.attempts} attempts: {first.error}",
            kind=kinds[0],
        )
    scores = {s.dimension: s.result.score for s in outcome.samples}
    return next(iter(scores.values())) if len(scores) == 1 else scores


def deliver(outcome: Any) -> Any:
    """Hand a body's outcome to Celery's tracer: a result, an expected failure, or a retry."""
    if isinstance(outcome, Parked):
        raise Retry(outcome.reason, exc=JuryError(outcome.reason), when=outcome.delay_s)
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


async def judge_body(runtime: WorkerRuntime, args: list[Any], kwargs: dict[str, Any]) -> Any:
    try:
        message = judge_message(args, kwargs)
    except MessageRefused as exc:
        return exc
    ref, live = message.ref, message.live
    waited = message.waited_s
    if message.parked_at is not None:
        waited += max(0.0, time.time() - message.parked_at)
    try:
        return task_result(await judge_task(runtime, ref, message.judged, waited, live))
    except MessageRefused as exc:
        return exc
    except Deferred as exc:
        waiting: dict[str, Any] = {"waited_s": round(waited, 3), "parked_at": round(time.time(), 3)}
        if live:
            waiting["live"] = True
        queue = _lane(runtime, ref)
        await runtime.in_store(
            runtime.queues.park, tuple(ref), queue, waiting, exc.countdown_s, exc.line
        )
        return Parked(str(exc), exc.countdown_s)
    except (SamplesNotStored, StoreNotRead) as exc:
        retries = message.store_retries
        if retries >= STORE_MAX_RETRIES:
            return exc
        delay = store_retry_delay(retries)
        carried: dict[str, Any] = {"store_retries": retries + 1}
        if isinstance(exc, SamplesNotStored):
            log.warning("%s; storing them again in %d s", exc, delay)
            carried["judged"] = exc.payload
        else:  # nothing was called yet: the task comes back as it was
            log.warning("could not prepare a task (%s); trying it again in %d s", exc, delay)
            if live:
                carried["live"] = True
        # Parking writes to Redis only (jury.broker.parking), never to the store that is away;
        # a task whose batch this worker has not read yet goes to the deployment's base queue.
        try:
            queue = _lane(runtime, ref)
        except Exception as lane_exc:
            if outage(lane_exc) is None:
                raise
            queue = runtime.settings.queue
        await runtime.in_store(runtime.queues.park, tuple(ref), queue, carried, delay)
        return Parked(str(exc), delay)


def _lane(runtime: WorkerRuntime, ref: SampleRef) -> str:
    config = runtime.config(ref.batch_id)
    settings = runtime.settings
    return judge_lanes(settings.queue, settings.lanes, [j.name for j in config.panel])[ref.judge]


async def aggregate_body(runtime: WorkerRuntime, args: list[Any], kwargs: dict[str, Any]) -> Any:
    try:
        cell, retries = cell_message(args, kwargs)
    except MessageRefused as exc:
        return exc
    try:
        verdicts = runtime.grouped(
            aggregate_group, AGGREGATE_LINGER_S, fill=AGGREGATE_FILL, expected=runtime.judging
        )
        outcome = await verdicts.submit(cell)
    except Exception as exc:
        # The store is down or locked: try again, backing off; the sweeper is the net.
        if retries >= STORE_MAX_RETRIES:
            return exc
        delay = store_retry_delay(retries)
        log.warning("aggregating %s failed: %s; again in %d s", cell, exc, delay)
        carried = {"store_retries": retries + 1}
        queue = runtime.settings.queue
        await runtime.in_store(runtime.queues.park, tuple(cell), queue, carried, delay, "", True)
        return Parked(f"aggregating failed: {exc}", delay)
    if isinstance(outcome, MessageRefused):
        return outcome
    if isinstance(outcome, CellIncomplete):
        # Not every expected sample is there (a judge left the panel): the sweeper and
        # `jury resume` see to the cell; trying again here would change nothing.
        log.warning("%s", outcome)
        return {"incomplete": len(outcome.missing)}
    return outcome.summary()


async def aggregate_group(runtime: WorkerRuntime, cells: Sequence[CellRef]) -> list[Outcome]:
    """The callbacks that arrived together, aggregated in one trip to the store."""
    return await runtime.in_store(aggregate_cells, runtime, cells)


async def generate_body(runtime: WorkerRuntime, args: list[Any], kwargs: dict[str, Any]) -> Any:
    try:
        ref = generation_message(args, kwargs)
        return await generate_task(runtime, ref)
    except MessageRefused as exc:
        return exc
    except Exception as exc:
        # The store or the broker failed: the task ends in FAILURE, logged; an answer stored
        # before is kept and never asked for twice by a later delivery.
        log.warning("generation %s failed: %s", ref, exc)
        return exc


Body = Callable[[WorkerRuntime, list[Any], dict[str, Any]], Coroutine[Any, Any, Any]]


def _engine(runtime: Callable[[], WorkerRuntime], body: Body) -> Callable[..., Any]:
    """The task's `engine_body`: start `body` on the worker's loop, return its future."""

    def start(
        task_id: str, args: list[Any], kwargs: dict[str, Any]
    ) -> concurrent.futures.Future[Any]:
        worker = runtime()
        return worker.loop.submit(body(worker, args, kwargs))

    return start


def _outcome(
    task: Task,
    runtime: Callable[[], WorkerRuntime],
    body: Body,
    args: list[Any],
    kwargs: dict[str, Any],
) -> Any:
    outcome = OUTCOMES.take(task.request.id)
    if outcome is None:  # not under the engine pool: run the body here, on the loop
        worker = runtime()
        outcome = worker.loop.run(body(worker, args, kwargs))
    return deliver(outcome)


def register_tasks(app: Celery, runtime: Callable[[], WorkerRuntime]) -> None:
    # ignore_result: the outcome lives in the store; Redis keeps no result per task.
    # The arguments are read by the bodies (schemas.task_messages), never bound here: a
    # message with arguments of another shape is refused in one line, not a TypeError.
    # `throws`: an expected failure, logged in one line without a traceback.
    @app.task(
        name=JUDGE_TASK, bind=True, ignore_result=True, throws=(JudgmentFailed, MessageRefused)
    )
    def judge_sample(self: Task, *args: Any, **carried: Any) -> Any:
        return _outcome(self, runtime, judge_body, list(args), carried)

    @app.task(name=AGGREGATE_TASK, bind=True, ignore_result=True, throws=(MessageRefused,))
    def aggregate(self: Task, *args: Any, **carried: Any) -> Any:
        return _outcome(self, runtime, aggregate_body, list(args), carried)

    @app.task(name=GENERATE_TASK, bind=True, ignore_result=True, throws=(MessageRefused,))
    def generate_output(self: Task, *args: Any, **carried: Any) -> Any:
        return _outcome(self, runtime, generate_body, list(args), carried)

    judge_sample.engine_body = _engine(runtime, judge_body)
    generate_output.engine_body = _engine(runtime, generate_body)
    aggregate.engine_body = _engine(runtime, aggregate_body)
