"""What a worker process holds once it has started: the store, caches, the LLM call.

The Celery task is a thin adapter onto `WorkerRuntime.judge`.

Exactly-once results rest on the store, not on a Celery chord: every judge task stores its
sample under the cell's unique key as soon as it has one, then counts the cell's stored
samples, and the task that finds them all there builds the verdict (after its own commit, so
of two tasks finishing a cell together at least one sees it complete; if both do, the second
verdict write is a no-op). A duplicate delivery can neither fire a verdict early nor count a
sample twice. The sweeper finalizes any complete cell still without a verdict (a worker died
between the two steps).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

import redis

from schemas.adaptive import escalation, first_round, first_round_panel, is_uncertain
from schemas.batch import BatchConfig, Item, Judge
from schemas.errors import JuryError
from schemas.results import SampleResult, Verdict
from schemas.settings import Settings, judge_lanes
from schemas.status import BatchState
from schemas.tasks import CellRef, SampleRef
from store.cache import CacheEntry
from store.cells import count_cell_samples, list_samples, record_sample, save_cell, stored_cost
from store.engine import session_factory
from store.escalations import is_escalated, mark_escalated
from store.repository import (
    batch_state,
    item_positions,
    load_config,
    load_item,
    stop_running_batch,
)
from worker.aggregation import build_verdict
from worker.budget import BudgetMeter
from worker.cache import ResultCache
from worker.gating import Deferred, GatedCall
from worker.judging import CallJudge, RetryPolicy, internal_error, judge_one_sample
from worker.pairwise import with_pairwise_outcome
from worker.ratelimit import RedisRateLimiter

log = logging.getLogger("jury.worker")

# Items are read once per worker, not once per sample: N samples × J judges × D dimensions
# of one item usually land on the same few workers close together in time.
ITEM_CACHE_SIZE = 256
CONFIG_CACHE_SIZE = 64
# A cancelled batch is noticed within this many seconds by every worker.
STATE_TTL_S = 2.0
# error_kind of a sample that was not judged (batch cancelled or out of budget).
SKIPPED = "skipped"


class SampleNotStored(JuryError):
    """The store refused a judged sample; the task retries storing it, without calling again."""

    def __init__(self, result: SampleResult, cause: Exception) -> None:
        super().__init__(f"could not store sample {result.judge}#{result.sample}: {cause}")
        self.result = result

    @property
    def payload(self) -> dict[str, Any]:
        """What the retried task carries as `judged`, to store without calling again."""
        return self.result.model_dump(mode="json")


class CellIncomplete(JuryError):
    """The aggregation ran before every sample of the cell was stored."""

    def __init__(self, cell: CellRef, missing: list[tuple[str, int]]) -> None:
        super().__init__(f"{cell} is missing {len(missing)} samples, e.g. {missing[:3]}")
        self.missing = missing


# Queues judge tasks (an adaptive cell's escalation): (task, queue) pairs.
PublishTasks = Callable[[list[tuple[SampleRef, str]]], None]


class WorkerRuntime:
    def __init__(
        self,
        settings: Settings,
        call: CallJudge | None = None,
        publish: PublishTasks | None = None,
    ) -> None:
        self.settings = settings
        self.publish = publish or _cannot_publish
        self.sessions = session_factory(settings.database_url)
        self.policy = RetryPolicy(
            max_attempts=settings.max_attempts,
            base_delay_s=settings.retry_base_delay_s,
            max_delay_s=settings.retry_max_delay_s,
        )
        if call is None:
            from worker.llm_client import complete  # imports litellm: once, at first use

            call = complete
        self.call = call
        self.config = functools.lru_cache(maxsize=CONFIG_CACHE_SIZE)(self._config)
        self.item = functools.lru_cache(maxsize=ITEM_CACHE_SIZE)(self._item)
        self._states: dict[str, tuple[float, BatchState]] = {}
        client = redis.Redis.from_url(settings.broker_url, socket_timeout=10)
        self.budget = BudgetMeter(client, lambda batch_id: stored_cost(self.sessions, batch_id))
        self.limiter = RedisRateLimiter(
            client, settings.rate_horizon_s, margin=settings.rate_margin
        )
        self.result_cache = ResultCache(self.sessions)

    def _config(self, batch_id: str) -> BatchConfig:
        return load_config(self.sessions, batch_id)

    def _item(self, batch_id: str, item_id: str) -> Item:
        return load_item(self.sessions, batch_id, item_id)

    def state(self, batch_id: str) -> BatchState:
        """The batch's state, cached for STATE_TTL_S; a state that would make us skip work is
        always read afresh, since a skipped task is lost until `jury resume`."""
        now = time.monotonic()
        cached = self._states.get(batch_id)
        if cached is None or now - cached[0] > STATE_TTL_S or cached[1].skips_work:
            cached = (now, batch_state(self.sessions, batch_id))
            self._states[batch_id] = cached
        return cached[1]

    def _skipped(self, ref: SampleRef, why: str) -> SampleResult:
        """A sample not judged at all (cancelled, out of budget): returned, never stored, so
        that `jury resume` finds it missing."""
        return SampleResult(
            judge=ref.judge, sample=ref.sample, error=why, error_kind=SKIPPED, attempts=0
        )

    def _out_of_budget(self, batch_id: str, config: BatchConfig) -> str | None:
        reached, spent, cap = self.budget.exhausted(batch_id, config.max_cost_usd)
        if not reached:
            return None
        reason = (
            f"budget reached: ${spent:.4f} spent of max_cost_usd ${cap:g}; no new judge calls. "
            f"Raise it with `jury resume {batch_id} --max-cost-usd N`"
        )
        if stop_running_batch(self.sessions, batch_id, reason):
            log.warning("batch %s: %s", batch_id, reason)
        self._states.pop(batch_id, None)
        return reason

    def judge(self, ref: SampleRef, judged: SampleResult | None = None) -> SampleResult:
        """One sample, stored, and the cell's verdict if that sample completed it.

        Any failure of the call, even our own, becomes a stored error sample. `judged` is a
        result an earlier attempt obtained but could not store (SampleNotStored).
        """
        state = self.state(ref.batch_id)
        if state.skips_work:
            return self._skipped(ref, f"batch {state.value}")
        result, cache = (judged, None) if judged else self._call(ref)
        if result.error_kind == SKIPPED:
            return result
        if judged is None:
            try:
                self.budget.spend(ref.batch_id, result.cost_usd)
            except Exception:
                log.exception("could not update the budget meter of %s", ref.batch_id)
        try:
            record_sample(self.sessions, ref.cell, result, cache)
        except Exception as exc:
            raise SampleNotStored(result, exc) from exc
        self.finalize_if_complete(ref.cell)
        return result

    def _call(self, ref: SampleRef) -> tuple[SampleResult, CacheEntry | None]:
        """The sample, and the answer to keep in the result cache (stored with it)."""
        try:
            config = self.config(ref.batch_id)
            out_of_budget = self._out_of_budget(ref.batch_id, config)
            if out_of_budget:
                return self._skipped(ref, out_of_budget), None
            judge = config.judge(ref.judge)
            dimension = config.dimension(ref.dimension)
            item = self.item(ref.batch_id, ref.item_id)
            key, cached = self.result_cache.lookup(config, judge, dimension, item, ref.sample)
            if cached is not None:
                return cached, None  # this very call was answered before: no call, no cost
            gated = GatedCall(self.call, self.limiter, self.settings.rate_horizon_s)
            result = judge_one_sample(judge, dimension, item, ref.sample, gated, self.policy)
            return result, self.result_cache.entry(key, judge, result)
        except Deferred:
            raise  # the task retries later; nothing was called, nothing is stored
        except Exception as exc:
            log.exception("judge task %s failed before or outside the judge call", ref)
            return internal_error(ref.judge, ref.sample, exc), None

    def finalize_if_complete(self, cell: CellRef) -> Verdict | None:
        """The verdict, if every sample the cell expects is stored (a cheap count first).

        An adaptive cell expects its first round; if that is uncertain, the cell is escalated
        (once, whoever gets there first) and then expects every sample.
        """
        config = self.config(cell.batch_id)
        count = count_cell_samples(self.sessions, cell)
        try:
            if config.adaptive is None or is_escalated(self.sessions, cell):
                return self.finalize(cell) if count >= config.samples_per_cell else None
            if count < len(first_round(config)):
                return None
            return self._first_round(cell, config)
        except CellIncomplete:
            log.warning("%s has samples of judges outside the panel; left to the sweeper", cell)
            return None

    def _first_round(self, cell: CellRef, config: BatchConfig) -> Verdict | None:
        assert config.adaptive is not None
        panel = first_round_panel(config)
        kept, verdict = self._verdict(cell, config, panel)
        more = escalation(config)
        if more and is_uncertain(verdict, config.adaptive.max_std):
            if mark_escalated(self.sessions, cell):
                self.queue_tasks(config, [SampleRef(*cell, j, i) for j, i in more])
            return None
        return self._save(cell, config, kept, verdict)

    def queue_tasks(self, config: BatchConfig, refs: list[SampleRef]) -> None:
        """Queue judge tasks of this batch, each on its judge's lane."""
        lanes = judge_lanes(
            self.settings.queue, self.settings.lanes, [j.name for j in config.panel]
        )
        self.publish([(ref, lanes[ref.judge]) for ref in refs])

    def finalize(self, cell: CellRef) -> Verdict:
        """Build and store the verdict from every sample of the panel."""
        config = self.config(cell.batch_id)
        kept, verdict = self._verdict(cell, config, config.panel)
        return self._save(cell, config, kept, verdict)

    def _verdict(
        self, cell: CellRef, config: BatchConfig, panel: list[Judge]
    ) -> tuple[list[SampleResult], Verdict]:
        samples = {(s.judge, s.sample): s for s in list_samples(self.sessions, cell)}
        expected = [(j.name, i) for j in panel for i in range(j.n)]
        missing = [key for key in expected if key not in samples]
        if missing:
            raise CellIncomplete(cell, missing)
        kept = [samples[key] for key in expected]
        dimension = config.dimension(cell.dimension)
        return kept, build_verdict(cell.item_id, dimension, panel, kept, config.aggregation)

    def _save(
        self, cell: CellRef, config: BatchConfig, kept: list[SampleResult], verdict: Verdict
    ) -> Verdict:
        if config.pairwise is not None:
            tolerance = config.pairwise.tie_tolerance
            verdict = with_pairwise_outcome(self.sessions, cell, verdict, kept, tolerance)
        position = item_positions(self.sessions, cell.batch_id, [cell.item_id])[cell.item_id]
        dimension_position = [d.name for d in config.dimensions].index(cell.dimension)
        save_cell(self.sessions, cell, kept, verdict, (position, dimension_position))
        return verdict


def _cannot_publish(tasks: list[tuple[SampleRef, str]]) -> None:
    raise JuryError(f"this runtime cannot queue tasks ({len(tasks)} escalation tasks)")
