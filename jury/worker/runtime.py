"""What a worker process holds once it has started: the store, caches, the budget meter, the
rate limiter, the LLM call and its event loop. Built from Settings once per process and
injected into the pipeline (jury.worker.judging.pipeline), the chord callback
(jury.worker.judging.cell_verdict)
and the sweeper; the Celery tasks are thin adapters onto those.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import gc
import logging
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

from jury.broker import keys as redis_keys
from jury.broker.budget import BudgetMeter, MeterReading
from jury.broker.redis_client import BrokerRedis
from jury.schemas.batch import BatchConfig, Item, Judge
from jury.schemas.status import BatchState
from jury.schemas.tasks import SampleRef
from jury.settings import Settings, judge_lanes
from jury.store.engine import session_factory
from jury.store.repository import (
    batch_state,
    item_positions,
    load_config,
    load_item_at,
    load_items_at,
    stop_running_batch,
)
from jury.store.samples import stored_cost
from jury.worker.engine.grouping import Expected, Grouped
from jury.worker.engine.loop import EventLoopThread
from jury.worker.engine.queues import TaskQueues
from jury.worker.judging.heuristic_pool import HeuristicPool
from jury.worker.judging.judge_calls import CallJudge, RetryPolicy
from jury.worker.judging.result_cache import ResultCache
from jury.worker.limits.budget import CallBudget, PriceLookup, budget_reason, no_prices
from jury.worker.limits.gating import GatedCall, never
from jury.worker.limits.redis_limiter import RedisRateLimiter

log = logging.getLogger("jury.worker")
T = TypeVar("T")

# Items are read once per worker, not once per sample: N samples × J judges × D dimensions
# of one item usually land on the same few workers close together in time.
ITEM_CACHE_SIZE = 256
# How long a closing worker waits for its HTTP connections to close.
CLOSE_TIMEOUT_S = 5.0
# Item positions remembered (two ids and an int each, about 200 bytes): a verdict's sort key,
# wanted from when the worker reads an item until its cells' verdicts are written, a few
# hundred items later at most. At 100,000 a worker's memory grew by 4.3 MB over a batch of a
# million judgments (22,223 items, all read by both workers) and would have reached 20 MB
# before the first clear (bench/scale); 10,000 is at most 2 MB, and a position forgotten
# costs one query for its group of verdicts.
POSITIONS_KEPT = 10_000
CONFIG_CACHE_SIZE = 64
# A cancelled batch is noticed within this many seconds by every worker.
STATE_TTL_S = 2.0
# Threads that run the store's (blocking) SQL for the event loop. One: the store work comes in
# groups (jury.worker.engine.grouping), SQLite takes one writer at a time anyway, and each more
# thread took the GIL from the loop more often (4 threads: 8.9 ms of CPU per judgment, 1: 8.4,
# bench/throughput on a loaded 2-core machine).
STORE_THREADS = 1


@functools.cache
def freeze_startup_heap() -> int:
    """Move every object alive once the worker's imports are done (LiteLLM's alone are some
    300,000: its price map, its providers' configs) out of the garbage collector's sight, once
    per process; returns how many. They live as long as the process anyway, but every full
    collection walked them all: 1.6 ms of a worker's CPU per judgment went to the collector in
    bench/throughput, 0.6 ms once frozen. What is created later is collected as before."""
    gc.collect()  # no garbage of the imports is frozen with them
    gc.freeze()
    return gc.get_freeze_count()


# Allocations between two young collections (CPython's default is 700). A judgment allocates
# thousands of objects, most of them gone by its end; collected every 700, the ones still in
# flight (hundreds of calls at once) were promoted and walked again by the older generations'
# collections. complete() against the simulator, 2,000 calls, 64 in flight, alternating:
# 0.23-0.36 ms of collector per call at 700, 0.07-0.09 ms at 10,000.
YOUNG_COLLECTION_THRESHOLD = 10_000


def space_young_collections() -> None:
    """Collect the youngest generation every YOUNG_COLLECTION_THRESHOLD allocations; the older
    generations keep their own thresholds."""
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, middle, oldest)


class WorkerRuntime:
    def __init__(
        self,
        settings: Settings,
        queues: TaskQueues,
        call: CallJudge | None = None,
        loop: EventLoopThread | None = None,
        broker: BrokerRedis | None = None,
    ) -> None:
        self.settings = settings
        self.queues = queues
        self.sessions = session_factory(settings.database_url)
        self.policy = RetryPolicy(
            max_attempts=settings.max_attempts,
            base_delay_s=settings.retry_base_delay_s,
            max_delay_s=settings.retry_max_delay_s,
        )
        self.waits_at_send: Callable[[Judge], bool] = never
        self.prices: PriceLookup = no_prices
        # The operator's egress policy: every call this worker makes is checked against it.
        self.egress = settings.egress_policy()
        if call is None:
            # Imports litellm: once, at first use.
            from jury.worker.calls.llm_client import complete, model_prices, waits_at_send, warm_up

            call = functools.partial(complete, egress=self.egress)
            self.waits_at_send, self.prices = waits_at_send, model_prices
            started = time.perf_counter()
            warm_up()
            frozen = freeze_startup_heap()
            space_young_collections()
            log.info(
                "warmed up in %.1f s (%d objects kept out of the collector's sight)",
                time.perf_counter() - started,
                frozen,
            )
        self.call = call
        self.loop = loop or EventLoopThread()
        self.store_threads = concurrent.futures.ThreadPoolExecutor(
            STORE_THREADS, thread_name_prefix="jury-store"
        )
        self.config = functools.lru_cache(maxsize=CONFIG_CACHE_SIZE)(self._config)
        self._items: OrderedDict[tuple[str, str], Item] = OrderedDict()
        self._items_lock = threading.Lock()  # the store threads and the provider batches'
        self._positions: dict[tuple[str, str], int] = {}
        self._states: dict[str, tuple[float, BatchState]] = {}
        self._uncapped: dict[str, float] = {}
        self._cap_looked: dict[str, float] = {}  # when a call last looked at the meter's cap
        self.redis = broker or BrokerRedis.from_settings(settings)
        self.budget = BudgetMeter(
            self.redis, settings.queue, lambda batch_id: stored_cost(self.sessions, batch_id)
        )
        self.limiter = RedisRateLimiter(
            self.redis.client,
            settings.rate_horizon_s,
            prefix=self.redis.key(redis_keys.RATE_LIMIT_PREFIX),
            margin=settings.rate_margin,
            lines_key=self.redis.key(redis_keys.WAITING_LINES),
        )
        self.result_cache = ResultCache(self.sessions)
        self._groups: dict[object, Grouped[Any, Any]] = {}
        # This worker's judge tasks in their calls: their samples, and perhaps their cells'
        # verdicts, are on their way to the store groups (jury.worker.engine.grouping).
        self.judging = Expected()
        # Heuristic judges' measuring processes: none starts before a heuristic is measured.
        self.heuristics = HeuristicPool(
            settings.heuristic_callables,
            settings.heuristic_processes,
            settings.heuristic_memory_mib,
        )

    def gated_call(self, batch_id: str, config: BatchConfig) -> GatedCall:
        """The LLM call behind the cluster-wide rate limiter and the batch's budget, for one
        task."""
        budget = None
        if not self._still_uncapped(batch_id, config):  # an uncapped batch's cost is stored
            budget = CallBudget(self.budget, batch_id, config.max_cost_usd, self.prices)
        return GatedCall(
            self.call,
            self.limiter,
            self.settings.rate_horizon_s,
            waits_at_send=self.waits_at_send,
            budget=budget,
        )

    def grouped(
        self,
        operation: Callable[[WorkerRuntime, Sequence[Any]], Awaitable[list[Any]]],
        linger_s: float = 0.0,
        fill: int | None = None,
        expected: Expected | None = None,
    ) -> Grouped[Any, Any]:
        """The process's group-commit queue for a store operation (jury.worker.engine.grouping);
        the options are its first caller's."""
        group = self._groups.get(operation)
        if group is None:
            run = functools.partial(operation, self)
            group = self._groups[operation] = Grouped(
                run, linger_s=linger_s, fill=fill, expected=expected
            )
        return group

    async def in_store(self, function: Callable[..., T], *args: Any) -> T:
        """Run blocking store work off the event loop, in one of the store threads."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.store_threads, functools.partial(function, *args))

    def _config(self, batch_id: str) -> BatchConfig:
        return load_config(self.sessions, batch_id)

    def item(self, batch_id: str, item_id: str) -> Item:
        """The item, from the worker's cache of the last ITEM_CACHE_SIZE read."""
        key = (batch_id, item_id)
        with self._items_lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
                return item
        item, position = load_item_at(self.sessions, batch_id, item_id)
        self._keep_items(batch_id, {item_id: (item, position)})
        return item

    def read_items(self, keys: Iterable[tuple[str, str]]) -> None:
        """Read the items of these (batch, item)s the cache lacks, in one query per batch: a
        group of tasks read theirs one query each (4 % of a loaded worker's CPU)."""
        missing: dict[str, list[str]] = {}
        with self._items_lock:
            wanted = set(keys) - self._items.keys()
        for batch_id, item_id in wanted:
            missing.setdefault(batch_id, []).append(item_id)
        for batch_id, item_ids in missing.items():
            self._keep_items(batch_id, load_items_at(self.sessions, batch_id, sorted(item_ids)))

    def _keep_items(self, batch_id: str, read: dict[str, tuple[Item, int]]) -> None:
        with self._items_lock:
            for item_id, (item, _) in read.items():
                self._items[(batch_id, item_id)] = item
            while len(self._items) > ITEM_CACHE_SIZE:
                self._items.popitem(last=False)
        self._remember_positions(batch_id, {i: position for i, (_, position) in read.items()})

    def item_positions(self, items: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """The positions of these (batch, item)s: remembered from the items this worker read
        (an item cache of ITEM_CACHE_SIZE has long dropped the item of a cell whose callback
        waited behind hundreds of tasks), the others read in one query per batch."""
        found: dict[tuple[str, str], int] = {}
        missing: dict[str, list[str]] = {}
        for key in set(items):
            position = self._positions.get(key)
            if position is None:
                missing.setdefault(key[0], []).append(key[1])
            else:
                found[key] = position
        for batch_id, item_ids in missing.items():
            read = item_positions(self.sessions, batch_id, sorted(item_ids))
            self._remember_positions(batch_id, read)
            found.update({(batch_id, item_id): p for item_id, p in read.items()})
        return found

    def _remember_positions(self, batch_id: str, positions: dict[str, int]) -> None:
        if len(self._positions) > POSITIONS_KEPT:
            self._positions.clear()
        self._positions.update({(batch_id, item_id): p for item_id, p in positions.items()})

    def state(self, batch_id: str) -> BatchState:
        """The batch's state, cached for STATE_TTL_S; a state that would make us skip work is
        always read afresh, since a skipped task is lost until `jury resume`."""
        now = time.monotonic()
        cached = self._states.get(batch_id)
        if cached is None or now - cached[0] > STATE_TTL_S or cached[1].skips_work:
            cached = (now, batch_state(self.sessions, batch_id))
            self._states[batch_id] = cached
        return cached[1]

    def uncapped(self, batch_id: str, config: BatchConfig) -> bool:
        """Whether the batch had no cap when last looked at (out_of_budget), within
        STATE_TTL_S: its calls need not be reserved (two round trips each)."""
        seen = self._uncapped.get(batch_id)
        return (
            config.max_cost_usd is None
            and seen is not None
            and time.monotonic() - seen < STATE_TTL_S
        )

    def _still_uncapped(self, batch_id: str, config: BatchConfig) -> bool:
        """uncapped(), looked at again once STATE_TTL_S has passed since the last look: one
        GET of the meter's cap. A task prepared just before the look lapsed (out_of_budget)
        would otherwise reserve and settle its call, two Redis scripts on the event loop, for
        a batch without a cap (1.6 % of a loaded worker's samples in bench/throughput)."""
        if config.max_cost_usd is not None:
            return False
        if self.uncapped(batch_id, config):
            return True
        now = time.monotonic()
        if now - self._cap_looked.get(batch_id, -STATE_TTL_S) < STATE_TTL_S:
            return False  # looked at within STATE_TTL_S, and it had a cap
        self._cap_looked[batch_id] = now
        if self.budget.cap(batch_id) is not None:  # `jury resume --max-cost-usd` gave one
            return False
        self._uncapped[batch_id] = now
        return True

    def out_of_budget(self, batch_id: str, config: BatchConfig) -> str | None:
        """Why no new judge call may start for this batch, if its budget is spent. A batch
        without a cap is looked at again every STATE_TTL_S (`jury resume --max-cost-usd`
        may give it one); a batch with one, at every call."""
        if self.uncapped(batch_id, config):
            return None
        reading = self.budget.read(batch_id, config.max_cost_usd)
        if reading.cap_usd is None:
            self._uncapped[batch_id] = time.monotonic()
        if not reading.exhausted:
            return None
        return self.stop_for_budget(batch_id, reading)

    def stop_for_budget(self, batch_id: str, reading: MeterReading) -> str:
        """Stop the batch, its budget spent; returns the reason stored with it."""
        reason = budget_reason(batch_id, reading)
        self.budget.close(batch_id)
        if stop_running_batch(self.sessions, batch_id, reason):
            log.warning("batch %s: %s", batch_id, reason)
        self._states.pop(batch_id, None)
        return reason

    def queue_tasks(self, config: BatchConfig, refs: list[SampleRef]) -> None:
        """Queue judge tasks of this batch, each on its judge's lane."""
        lanes = judge_lanes(
            self.settings.queue, self.settings.lanes, [j.name for j in config.panel]
        )
        self.queues.publish([(ref, lanes[ref.judge]) for ref in refs])

    def close(self) -> None:
        # The HTTP session of jury's client, if a call made one (not imported otherwise: it
        # imports LiteLLM, which a runtime with a call of its own never needs).
        wire = sys.modules.get("jury.worker.calls.openai_wire")
        if wire is not None:
            try:
                self.loop.submit(wire.close_session()).result(CLOSE_TIMEOUT_S)
            except Exception as exc:  # a stuck or stopped loop: the process is ending anyway
                log.debug("could not close the HTTP session: %s", exc)
        self.loop.stop()
        self.store_threads.shutdown(wait=False, cancel_futures=True)
        self.heuristics.close()
