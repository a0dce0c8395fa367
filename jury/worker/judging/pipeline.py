"""The one judging pipeline: what every judge task does, whatever the batch's mode.

A judge task is one (item, dimension, judge, sample) reference; its call spec
(jury.schemas.calls) says which dimensions its call scores and in which orders a pair is shown.
Every task runs the same sequence:

1. the task's reference against the batch as stored (jury.worker.judging.message_checks: a
   message that does not fit is refused, nothing called or stored), then the batch's state
   and budget (a cancelled batch, or one out of budget, skips the task: nothing is called,
   nothing stored, so `jury resume` finds it missing);
2. the result cache: the very same calls answered before are not paid for again;
3. the rate-limited call(s), with jury's retry policy (jury.worker.judging.judge_calls), or for a
   heuristic judge its measures of the output (jury.worker.judging.heuristics: no call, no cost);
4. the budget: each call reserves its estimated cost on the batch's meter before it is sent,
   and its real cost settles the reservation (jury.worker.limits.budget);
5. one store write (each sample as it may count, jury.schemas.sample_checks): every sample of
   the task, its pair scores and the answer to cache, in one
   transaction under the samples' unique keys;
6. the completion check, the chord's barrier: for each cell that got a new sample, count its
   distinct stored samples; a cell with every sample it expects claims its callback (once, see
   jury.store.chords) and the `jury.aggregate_cell` callback is sent.

A duplicate delivery stores nothing new and so sends no callback; a killed worker's task runs
again and stores what the first run did not. Samples the store refused travel in the retried
task's arguments (SamplesNotStored), so a database hiccup never pays for the calls twice.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from jury.broker.redis_client import outage
from jury.errors import JuryError, MessageRefused
from jury.schemas.adaptive import first_round
from jury.schemas.batch import BatchConfig, Dimension, Item, Judge
from jury.schemas.calls import CallSpec, call_spec
from jury.schemas.item_dimensions import item_dimension_names
from jury.schemas.provider_batches import custom_id
from jury.schemas.results import CellSample, SampleResult
from jury.schemas.sample_checks import counted
from jury.schemas.tasks import CellRef, SampleRef
from jury.store.cache import CacheEntry, find_cached_answers
from jury.store.chords import claim_callbacks
from jury.store.escalations import is_escalated
from jury.store.provider_batches import record_requests
from jury.store.samples import SampleWrite, count_cells, record_writes
from jury.worker.engine.grouping import Grouped
from jury.worker.judging.heuristics import measure
from jury.worker.judging.judge_calls import internal_error, judge_call, task_messages
from jury.worker.judging.message_checks import check_judged, check_sample_ref, stored_parts
from jury.worker.judging.prompt_templates import Asking, asking_of
from jury.worker.judging.result_cache import cache_key, cached_samples
from jury.worker.limits.budget import BudgetRefused
from jury.worker.limits.gating import Deferred
from jury.worker.runtime import WorkerRuntime

log = logging.getLogger("jury.worker")
# How long a short store group waits for more samples, and how many it waits for (stores):
# a worker's share of the strict quota in bench/ratelimit, 9-18 judgments a second, meets
# in groups of five to nine. A task killed meanwhile is delivered again, as one killed in its
# call is: its samples were not stored, so they are stored once, by the next delivery.
STORE_LINGER_S = 0.5
STORE_FILL = 32


class StoreNotRead(JuryError):
    """The store could not be read before the call (an outage): nothing was called or paid;
    the task is queued again, as it was, after a store retry's delay."""


class SamplesNotStored(JuryError):
    """The store refused a task's samples: the task retries storing them, without calling."""

    def __init__(self, samples: list[CellSample], cause: Exception) -> None:
        super().__init__(f"could not store {len(samples)} samples: {cause}")
        self.samples = samples

    @property
    def payload(self) -> list[dict[str, object]]:
        """What the retried task carries as `judged`, to store without calling again."""
        return [s.model_dump(mode="json") for s in self.samples]


@dataclass
class TaskOutcome:
    """What a judge task did: the samples it stored, or why it judged nothing."""

    samples: list[CellSample] = field(default_factory=list)
    skipped: str | None = None
    cached: bool = False


@dataclass
class _Prepared:
    """Everything a task needs before its call, read in one trip to the store."""

    config: BatchConfig
    judge: Judge
    spec: CallSpec
    dimensions: list[Dimension]
    item: Item
    messages: list[list[dict[str, str]]]
    cache_key: str | None
    cached: list[CellSample] | None = None
    # What the messages ask beyond a score (a vote, a template): how to read the answers.
    asking: Asking | None = None


async def judge_task(
    runtime: WorkerRuntime,
    ref: SampleRef,
    judged: list[CellSample] | None = None,
    waited_s: float = 0.0,
    live: bool = False,
) -> TaskOutcome:
    """Judge (or, with `judged`, only store) one task; send the callbacks of the cells it
    completes. `waited_s`: how long the task has been parked so far. A judge with `batch_api`
    has its calls stored as requests for a provider batch instead (unless `live`: a request the
    provider's batch failed, sent on to a live call)."""
    if judged is not None:  # judged and paid for by an earlier attempt, says the message
        try:
            await runtime.in_store(check_carried, runtime, ref, judged)
        except MessageRefused:
            raise
        except Exception as exc:  # the store is away: they are stored (and checked) later
            raise SamplesNotStored(judged, exc) from exc
        await _store(runtime, ref, judged, None)
        return TaskOutcome(judged)
    try:
        prepared = await runtime.grouped(prepare_group).submit(ref)
    except Exception as exc:
        if (away := outage(exc)) is None:
            raise
        # The database is away (a restart, a cut): the task must wait for it, not fail.
        raise StoreNotRead(away) from exc
    if isinstance(prepared, MessageRefused):
        raise prepared
    if isinstance(prepared, str):
        return TaskOutcome(skipped=prepared)
    limit = prepared.config.max_wait_s
    if limit is not None and waited_s > limit:
        # The one wait that fails a sample: the batch's own bound on waiting in all.
        samples = _waited_too_long(ref, prepared, waited_s, limit)
        await _store(runtime, ref, samples, None)
        return TaskOutcome(samples)
    if prepared.cached is not None:  # no call made, nothing spent
        await _store(runtime, ref, prepared.cached, None)
        return TaskOutcome(prepared.cached, cached=True)
    if prepared.judge.batch_api and not live:
        await runtime.in_store(record_requests, runtime.sessions, batch_requests(ref, prepared))
        return TaskOutcome(skipped=BATCH_API_QUEUED)
    try:
        with runtime.judging.coming():  # its samples are on their way to the store
            samples = await _call(runtime, ref, prepared)
    except BudgetRefused as exc:  # nothing stored: `jury resume --max-cost-usd` finds it
        reason = await runtime.in_store(runtime.stop_for_budget, ref.batch_id, exc.reading)
        return TaskOutcome(skipped=reason)
    except Deferred as exc:
        if limit is None or waited_s + exc.countdown_s <= limit:
            raise  # parked by the task: it comes back when its slot is near
        samples = _waited_too_long(ref, prepared, waited_s + exc.countdown_s, limit)
        await _store(runtime, ref, samples, None)
        return TaskOutcome(samples)
    cache = runtime.result_cache.entry(prepared.cache_key, prepared.judge, samples)
    await _store(runtime, ref, samples, cache)  # its calls' cost is on the meter already
    return TaskOutcome(samples)


BATCH_API_QUEUED = "queued for the provider's Batch API"


def batch_requests(ref: SampleRef, prepared: _Prepared) -> list[dict[str, object]]:
    """The task's calls as requests for a provider batch, one per call, named by custom_id."""
    return [
        {
            "custom_id": custom_id(*ref, call),
            "batch_id": ref.batch_id,
            "item_id": ref.item_id,
            "dimension": ref.dimension,
            "judge": ref.judge,
            "sample": ref.sample,
            "call": call,
            "messages": messages,
        }
        for call, messages in enumerate(prepared.messages)
    ]


def _waited_too_long(
    ref: SampleRef, prepared: _Prepared, waited_s: float, limit: float
) -> list[CellSample]:
    error = SampleResult(
        judge=ref.judge,
        sample=ref.sample,
        error=f"would wait {waited_s:.0f} s in all for a rate-limit slot, beyond the batch's "
        f"max_wait_s of {limit:g} s",
        error_kind="wait_limit",
        attempts=0,
    )
    return [CellSample(dimension=name, result=error) for name in prepared.spec.dimensions]


def check_carried(runtime: WorkerRuntime, ref: SampleRef, judged: Sequence[CellSample]) -> None:
    """MessageRefused unless the task and the samples its message carries fit the batch."""
    config, item = stored_parts(runtime, ref.batch_id, ref.item_id, "judge task")
    check_sample_ref(runtime, config, item, ref)
    spec = call_spec(config, ref.dimension, item_dimension_names(config, item))
    check_judged(config, ref, spec, judged)


Prepared = _Prepared | str | MessageRefused


async def prepare_group(runtime: WorkerRuntime, refs: Sequence[SampleRef]) -> list[Prepared]:
    return await runtime.in_store(_prepare_all, runtime, refs)


def _prepare_all(runtime: WorkerRuntime, refs: Sequence[SampleRef]) -> list[Prepared]:
    """For each task: the batch's state and budget, its spec, item and messages; then the
    cached answers of all of them in one query. Or why a task judges nothing (a str), or why
    its message is refused."""
    runtime.read_items((ref.batch_id, ref.item_id) for ref in refs)
    prepared = [_prepare(runtime, ref) for ref in refs]
    cache = runtime.result_cache
    keys = [
        p.cache_key
        for p in prepared
        if isinstance(p, _Prepared) and p.cache_key and cache.worth_looking(p.judge.model)
    ]
    try:
        answers = find_cached_answers(runtime.sessions, keys) if keys else {}
    except Exception:
        log.exception("result cache lookup failed; calling the judges")
        answers = {}
    for ref, p in zip(refs, prepared, strict=True):
        if isinstance(p, _Prepared) and p.cache_key in answers:
            p.cached = cached_samples(answers[p.cache_key], p.judge, ref.sample)
    return prepared


def _prepare(runtime: WorkerRuntime, ref: SampleRef) -> Prepared:
    try:  # the batch's config and the item are cached: no trip to the store, mostly
        config, item = stored_parts(runtime, ref.batch_id, ref.item_id, "judge task")
        check_sample_ref(runtime, config, item, ref)
    except MessageRefused as exc:
        return exc
    state = runtime.state(ref.batch_id)
    if state.skips_work:
        return f"batch {state.value}"
    out_of_budget = runtime.out_of_budget(ref.batch_id, config)
    if out_of_budget:
        return out_of_budget
    judge = config.judge(ref.judge)
    spec = call_spec(config, ref.dimension, item_dimension_names(config, item))
    dimensions = [config.dimension(name) for name in spec.dimensions]
    if judge.heuristic is not None:  # no call: no messages, nothing worth caching
        return _Prepared(config, judge, spec, dimensions, item, [], None)
    asking = asking_of(config, judge)
    messages = task_messages(item, dimensions, spec.orders, judge.reasoning_first, asking)
    key = cache_key(judge, item, messages, ref.sample) if config.cache else None
    return _Prepared(config, judge, spec, dimensions, item, messages, key, asking=asking)


async def _call(runtime: WorkerRuntime, ref: SampleRef, prepared: _Prepared) -> list[CellSample]:
    """The task's calls (or a heuristic judge's measures); any failure of our own becomes
    error samples, never a raise."""
    try:
        if prepared.judge.heuristic is not None:  # measured here: no LLM, no slot, no cost
            return await measure(
                prepared.judge,
                prepared.item,
                prepared.dimensions,
                prepared.spec.orders,
                ref.sample,
                runtime.heuristics,
            )
        gated = runtime.gated_call(ref.batch_id, prepared.config)
        return await judge_call(
            prepared.judge,
            prepared.dimensions,
            prepared.spec.orders,
            prepared.messages,
            ref.sample,
            gated,
            runtime.policy,
            asking=prepared.asking,
        )
    except (Deferred, BudgetRefused):
        raise  # the task comes back later, or not while the budget is spent; nothing stored
    except Exception as exc:
        log.exception("judge task %s failed outside the judge call", ref)
        error = internal_error(ref.judge, ref.sample, exc)
        return [CellSample(dimension=name, result=error) for name in prepared.spec.dimensions]


@dataclass(frozen=True)
class _Write:
    ref: SampleRef
    write: SampleWrite
    spent: bool


async def _store(
    runtime: WorkerRuntime,
    ref: SampleRef,
    samples: list[CellSample],
    cache: CacheEntry | None,
    spent: bool = False,
) -> None:
    write = SampleWrite(ref.batch_id, ref.item_id, samples, cache)
    try:
        await stores(runtime).submit(_Write(ref, write, spent))
    except Exception as exc:
        raise SamplesNotStored(samples, exc) from exc


def stores(runtime: WorkerRuntime) -> Grouped[_Write, None]:
    """The worker's store group: unthrottled, tasks finish many at a time and fill a group
    while the one before is written; a throttled judge's finish a rate-limit slot apart, and
    each alone paid a transaction, a chord count and a claim (bench/ratelimit). So a group
    waits up to STORE_LINGER_S for STORE_FILL samples, while other tasks of this worker are
    still calling: once none is, the group goes at once (a batch's last samples)."""
    return runtime.grouped(store_group, STORE_LINGER_S, fill=STORE_FILL, expected=runtime.judging)


async def store_group(runtime: WorkerRuntime, writes: Sequence[_Write]) -> list[None]:
    await runtime.in_store(store_writes, runtime, writes)
    return [None] * len(writes)


def store_writes(runtime: WorkerRuntime, writes: Sequence[_Write]) -> list[CellRef]:
    """Many tasks' samples in one transaction, then the chord's barrier for every cell they
    gave a new sample, then the callbacks of the cells completed; returns those cells."""
    writes = [_sound(runtime, w) for w in writes]
    _spend(runtime, [w for w in writes if w.spent])
    new = record_writes(runtime.sessions, [w.write for w in writes])
    touched = sorted(
        {
            CellRef(w.ref.batch_id, w.ref.item_id, d)
            for w, dims in zip(writes, new, strict=True)
            for d in dims
        }
    )
    complete = claim_complete_cells(runtime, touched) if touched else []
    if complete:
        try:
            runtime.queues.send_callbacks(complete)
        except Exception:
            # The sweeper finds complete cells without a verdict and aggregates them.
            log.exception("could not send the callbacks of %d complete cells", len(complete))
    return complete


def _sound(runtime: WorkerRuntime, write: _Write) -> _Write:
    """The write with each sample as it may count (schemas.sample_checks): whatever made it
    (a call, the result cache, a provider's batch), no sample is stored with a score off its
    scale or a cost that is not one. Never seen from jury's own calls; said in one line."""
    config = runtime.config(write.ref.batch_id)
    samples = []
    for s in write.write.samples:
        result = counted(config, config.dimension(s.dimension), s.result, s.pair)
        if result is not s.result:
            log.warning("%s: %s", write.ref, result.error)
            s = CellSample(dimension=s.dimension, result=result)
        samples.append(s)
    if all(a is b for a, b in zip(samples, write.write.samples, strict=True)):
        return write
    return replace(write, write=replace(write.write, samples=samples))


def _spend(runtime: WorkerRuntime, writes: Sequence[_Write]) -> None:
    """What these calls cost, on each batch's budget meter (one update per batch): a
    provider batch's results, whose calls had no reservation of their own."""
    per_batch: dict[str, float] = {}
    for w in writes:
        cost = sum(s.result.cost_usd for s in w.write.samples)
        per_batch[w.ref.batch_id] = per_batch.get(w.ref.batch_id, 0.0) + cost
    for batch_id, cost in per_batch.items():
        try:
            runtime.budget.add_spent(batch_id, cost)
        except Exception:
            log.exception("could not update the budget meter of %s", batch_id)


def expected_round(runtime: WorkerRuntime, config: BatchConfig, cell: CellRef) -> tuple[int, int]:
    """(round, samples expected): an adaptive cell expects its first round, or every sample
    once it was escalated; any other cell expects every sample, in one round."""
    if config.adaptive is None:
        return 0, config.samples_per_cell
    if is_escalated(runtime.sessions, cell):
        return 1, config.samples_per_cell
    return 0, len(first_round(config))


def claim_complete_cells(runtime: WorkerRuntime, cells: Sequence[CellRef]) -> list[CellRef]:
    """The chord's barrier: the cells (of these) whose distinct stored samples reach what they
    expect, and whose callback this caller is the first to claim."""
    counts = count_cells(runtime.sessions, cells)
    complete = []
    for cell in cells:
        round_, expected = expected_round(runtime, runtime.config(cell.batch_id), cell)
        if counts.get(cell, 0) >= expected:
            complete.append((cell, round_))
    return claim_callbacks(runtime.sessions, complete) if complete else []
