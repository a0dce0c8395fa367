"""The fleet's figures, which no one worker knows: tasks queued, held, parked and waiting per
queue, workers alive, running batches and each one's spend against its budget, providers'
batches open. They live in Redis and the store, so they are read once for the whole
deployment, by one exporter (`jury exporter`), at each scrape: 20 workers serving them too
would make every sum 20 times too large.

A reading is kept for MIN_INTERVAL_S: two Prometheus servers (a pair for availability), or a
person reloading /metrics, cost Redis one reading. When Redis or the store cannot be read,
only `jury_fleet_read_ok 0` is served: no figure that is not true now.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from jury.broker.budget import BudgetMeter, MeterReading
from jury.broker.census import Census, Counting
from jury.broker.redis_client import BrokerRedis, log_step_failure
from jury.settings import Settings
from jury.store.provider_batches import unfinished_batches
from jury.store.repository import load_config, running_batches
from jury.store.samples import stored_cost
from jury.store.sql import Sessions
from jury.worker.engine.watchdog import this_deployments

log = logging.getLogger("jury.exporter")

MIN_INTERVAL_S = 2.0
# Running batches whose budget is served, at most (each is a `batch` label value): the
# label is bounded by what runs at once, and this bounds it whatever runs.
MAX_BATCHES = 200


@dataclass(frozen=True)
class FleetReading:
    census: Census
    budgets: dict[str, MeterReading] = field(default_factory=dict)  # running batch -> meter
    running: int = 0
    provider_batches: dict[str, int] = field(default_factory=dict)  # state -> how many
    seconds: float = 0.0


def read_fleet(
    counting: Counting, meter: BudgetMeter, sessions: Sessions, cap: Callable[[str], float | None]
) -> FleetReading:
    """Everything the exporter serves, read now. `cap`: a batch's max_cost_usd as submitted
    (the meter's own cap, set by `jury resume --max-cost-usd`, wins)."""
    started = time.perf_counter()
    census = counting.take()
    running = this_deployments(counting.broker, counting.settings, running_batches(sessions))
    budgets = {b: meter.read(b, cap(b)) for b in sorted(running)[:MAX_BATCHES]}
    providers = Counter(p.state for p in unfinished_batches(sessions))
    return FleetReading(
        census, budgets, len(running), dict(providers), time.perf_counter() - started
    )


def families(reading: FleetReading) -> list[Metric]:
    """The reading as Prometheus metric families."""
    tasks = GaugeMetricFamily(
        "jury_tasks",
        "Tasks of the deployment by queue and state: queued, held (by a worker), parked "
        "(due later), waiting (for an in-flight slot)",
        labels=["queue", "state"],
    )
    for (queue, state), count in sorted(reading.census.tasks.items()):
        tasks.add_metric([queue, state], count)
    spent = GaugeMetricFamily(
        "jury_batch_spent_usd", "A running batch's settled spend, in USD", labels=["batch"]
    )
    reserved = GaugeMetricFamily(
        "jury_batch_reserved_usd",
        "What a running batch's calls in flight may still cost, at most, in USD",
        labels=["batch"],
    )
    cap = GaugeMetricFamily(
        "jury_batch_budget_usd",
        "A running batch's max_cost_usd (batches with one)",
        labels=["batch"],
    )
    for batch, meter in reading.budgets.items():
        spent.add_metric([batch], meter.spent_usd)
        reserved.add_metric([batch], meter.reserved_usd)
        if meter.cap_usd is not None:
            cap.add_metric([batch], meter.cap_usd)
    providers = GaugeMetricFamily(
        "jury_provider_batches",
        "Providers' batches not yet stored, by state (submitting, open, ended)",
        labels=["state"],
    )
    for state in ("submitting", "open", "ended"):
        providers.add_metric([state], reading.provider_batches.get(state, 0))
    return [
        tasks,
        GaugeMetricFamily(
            "jury_workers_alive",
            "Workers of the deployment whose heartbeat is younger than JURY_HEARTBEAT_TIMEOUT",
            value=reading.census.workers_alive,
        ),
        GaugeMetricFamily(
            "jury_batches_running", "Batches running or being submitted", value=reading.running
        ),
        spent,
        reserved,
        cap,
        providers,
        GaugeMetricFamily(
            "jury_fleet_read_seconds", "How long the exporter's reading took", value=reading.seconds
        ),
        GaugeMetricFamily(
            "jury_fleet_read_complete",
            "1 if every shared set was counted to its end, 0 if one was too large",
            value=int(reading.census.complete),
        ),
    ]


def read_ok(ok: bool) -> Metric:
    return GaugeMetricFamily(
        "jury_fleet_read_ok", "1 if Redis and the store were read at this scrape", value=int(ok)
    )


class FleetCollector(Collector):
    """A prometheus-client collector reading the fleet at each scrape (at most every
    MIN_INTERVAL_S)."""

    def __init__(
        self,
        settings: Settings,
        broker: BrokerRedis,
        sessions: Sessions,
        min_interval_s: float = MIN_INTERVAL_S,
    ) -> None:
        self.counting = Counting(broker, settings)
        self.sessions = sessions
        self.meter = BudgetMeter(broker, settings.queue, lambda b: stored_cost(sessions, b))
        self.min_interval_s = min_interval_s
        self._lock = threading.Lock()
        self._kept: tuple[float, list[Metric]] | None = None
        self._cap = functools.lru_cache(maxsize=MAX_BATCHES)(self._batch_cap)

    def _batch_cap(self, batch_id: str) -> float | None:
        return load_config(self.sessions, batch_id).max_cost_usd

    def describe(self) -> Iterable[Metric]:
        return []  # nothing read when registered

    def collect(self) -> Iterable[Metric]:
        with self._lock:  # scrapes at once wait for one reading
            now = time.monotonic()
            if self._kept is not None and now - self._kept[0] < self.min_interval_s:
                return self._kept[1]
            try:
                reading = read_fleet(self.counting, self.meter, self.sessions, self._cap)
                served = [*families(reading), read_ok(True)]
            except Exception as exc:
                log_step_failure(log, "reading the fleet", exc)
                served = [read_ok(False)]
            self._kept = (now, served)
            return served
