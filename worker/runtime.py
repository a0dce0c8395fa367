"""What a worker process holds once it has started: the store, caches, the LLM call.

The Celery tasks are thin adapters onto `WorkerRuntime.judge` and `WorkerRuntime.aggregate`.

Exactly-once results rest on the store, not on Celery's chord: every judge task stores its
sample under the cell's unique key as soon as it has one, and a verdict is built only from
the stored samples once all of them are there. Celery's Redis chord counts finished parts,
not distinct cells, so a duplicate delivery can fire the callback early; the callback then
finds the cell incomplete and waits (retries), and the sweeper finalizes any complete cell
that still has no verdict.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

import redis
from pydantic import ValidationError

from schemas.batch import BatchConfig, Item
from schemas.errors import JuryError
from schemas.results import SampleResult, Verdict
from schemas.settings import Settings
from schemas.status import BatchState
from schemas.tasks import CellRef, SampleRef
from store.cells import list_samples, record_sample, save_cell, stored_cost
from store.engine import session_factory
from store.repository import (
    batch_state,
    item_positions,
    load_config,
    load_item,
    stop_running_batch,
)
from worker.aggregation import build_verdict, unique_samples
from worker.budget import BudgetMeter
from worker.gating import Deferred, GatedCall
from worker.judging import CallJudge, RetryPolicy, judge_one_sample
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


class CellIncomplete(JuryError):
    """The aggregation ran before every sample of the cell was stored."""

    def __init__(self, cell: CellRef, missing: list[tuple[str, int]]) -> None:
        super().__init__(f"{cell} is missing {len(missing)} samples, e.g. {missing[:3]}")
        self.missing = missing


class WorkerRuntime:
    def __init__(self, settings: Settings, call: CallJudge | None = None) -> None:
        self.settings = settings
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

    def judge(self, ref: SampleRef) -> SampleResult:
        """One sample, stored; any failure, even our own, becomes an error sample, never a
        raise (a raise would fail the chord)."""
        state = self.state(ref.batch_id)
        if state.skips_work:
            return self._skipped(ref, f"batch {state.value}")
        try:
            config = self.config(ref.batch_id)
            out_of_budget = self._out_of_budget(ref.batch_id, config)
            if out_of_budget:
                return self._skipped(ref, out_of_budget)
            judge = config.judge(ref.judge)
            dimension = config.dimension(ref.dimension)
            item = self.item(ref.batch_id, ref.item_id)
            gated = GatedCall(self.call, self.limiter, self.settings.rate_horizon_s)
            result = judge_one_sample(judge, dimension, item, ref.sample, gated, self.policy)
        except Deferred:
            raise  # the task retries later; nothing was called, nothing is stored
        except Exception as exc:
            log.exception("judge task %s failed before or outside the judge call", ref)
            result = SampleResult(
                judge=ref.judge,
                sample=ref.sample,
                error=f"{type(exc).__name__}: {exc}"[:500],
                error_kind="internal",
                attempts=0,
            )
        try:
            self.budget.spend(ref.batch_id, result.cost_usd)
        except Exception:
            log.exception("could not update the budget meter of %s", ref.batch_id)
        try:
            record_sample(self.sessions, ref.cell, result)
        except Exception:
            # The chord carries the result to the callback, which stores it there.
            log.exception("could not store sample %s now; the callback will", ref)
        return result

    def aggregate(self, cell: CellRef, raw_results: list[Any]) -> Verdict | None:
        """Build and store the verdict of a cell from its stored samples (plus the chord's).

        Raises CellIncomplete when a sample is still missing; returns None for a cancelled
        batch, whose cells are left as they are.
        """
        if self.state(cell.batch_id).skips_work:
            return None
        delivered = []
        for raw in raw_results or []:
            try:
                delivered.append(SampleResult.model_validate(raw))
            except ValidationError:
                log.warning("dropping a malformed sample result for %s: %.200r", cell, raw)
        return self.finalize(cell, [s for s in delivered if s.error_kind != SKIPPED])

    def finalize(self, cell: CellRef, delivered: list[SampleResult] | None = None) -> Verdict:
        config = self.config(cell.batch_id)
        panel = config.panel
        # The stored sample wins: it is what the results will show, first delivery first.
        samples = unique_samples(delivered or [])
        for stored in list_samples(self.sessions, cell):
            samples[(stored.judge, stored.sample)] = stored
        expected = [(j.name, i) for j in panel for i in range(j.n)]
        missing = [key for key in expected if key not in samples]
        if missing:
            raise CellIncomplete(cell, missing)
        kept = [samples[key] for key in expected]
        dimension = config.dimension(cell.dimension)
        verdict = build_verdict(cell.item_id, dimension, panel, kept, config.aggregation)
        position = item_positions(self.sessions, cell.batch_id, [cell.item_id])[cell.item_id]
        dimension_position = [d.name for d in config.dimensions].index(cell.dimension)
        save_cell(self.sessions, cell, kept, verdict, (position, dimension_position))
        return verdict
