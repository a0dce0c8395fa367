"""A deployment's tasks counted where they are, per queue, and its workers alive: what the
exporter (jury.worker.metrics.fleet) serves to Prometheus.

- queued: in the deployment's queues (LLEN, one round trip for all);
- held: delivered to a worker, not yet acknowledged (kombu's `unacked` hash, shared by every
  deployment on the Redis: counted by each message's routing key);
- parked: in the parked set, due later (jury.broker.parking; shared too, counted by the
  queue each member names);
- waiting: in a model's waiting line for an in-flight slot (shared, counted the same way).

The shared hash, set and lines are counted in Redis a step of COUNT_STEP members at a time
(count_by_queue.lua): only counts come back, and Redis is held for a step, never for the
whole set, however many tasks wait. A member moved between two steps may be counted twice
or not at all: these are gauges, read again at the next scrape.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from jury.broker import keys as redis_keys
from jury.broker.redis_client import BrokerRedis, as_text
from jury.broker.scripts import lua
from jury.settings import Settings

QUEUED = "queued"
HELD = "held"
PARKED = "parked"
WAITING = "waiting"
STATES = (QUEUED, HELD, PARKED, WAITING)
COUNT_STEP = 1000
# Steps per key and census at most: 10 million members of the parked set, say; a larger
# set is counted this far (the census says so with `complete`).
MAX_STEPS = 10_000


@dataclass(frozen=True)
class Census:
    """Tasks per (queue, state), queues as plain names; live workers of the deployment."""

    tasks: dict[tuple[str, str], int]
    workers_alive: int
    complete: bool = True  # False: a shared set too large to count to its end


class Counting:
    """Counts a deployment's tasks by queue and state, a step at a time."""

    def __init__(self, broker: BrokerRedis, settings: Settings) -> None:
        self.broker = broker
        self.settings = settings
        self.queues = settings.all_queues
        self._count = broker.client.register_script(lua("count_by_queue"))
        self._complete = True

    def take(self) -> Census:
        self._complete = True
        broker, queues = self.broker, self.queues
        keys = [broker.key(queue) for queue in queues]
        tasks: dict[tuple[str, str], int] = {}
        with broker.client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.llen(key)
            lengths = pipe.execute()
        waiting = [0] * len(queues)
        for line in broker.client.smembers(broker.key(redis_keys.WAITING_LINES)):
            text = line.decode() if isinstance(line, bytes) else str(line)
            waiting = [a + b for a, b in zip(waiting, self._by_queue(text, keys), strict=True)]
        per_state = {
            QUEUED: [int(n) for n in lengths],
            # kombu's unacked values name their queue by its routing key: the plain name.
            HELD: self._by_queue(broker.unacked_key, queues),
            PARKED: self._by_queue(broker.key(redis_keys.PARKED), keys),
            WAITING: waiting,
        }
        for state, counts in per_state.items():
            for queue, count in zip(queues, counts, strict=True):
                tasks[(queue, state)] = count
        return Census(tasks, self.workers_alive(), self._complete)

    def _by_queue(self, key: str, names: Sequence[str]) -> list[int]:
        """How many members of `key` belong to each of `names`, counted in Redis."""
        totals = [0] * len(names)
        where = "0"
        for _ in range(MAX_STEPS):
            reply = self._count(keys=[key], args=[where, COUNT_STEP, *names])
            totals = [a + int(b) for a, b in zip(totals, reply[1:], strict=True)]
            where = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
            if where == "0":
                return totals
        self._complete = False
        return totals

    def workers_alive(self) -> int:
        """Workers whose last beat is younger than the heartbeat timeout, by Redis' clock
        (jury.worker.engine.liveness beats in milliseconds of it)."""
        client = self.broker.client
        seconds, micros = client.time()
        now_ms = seconds * 1000 + micros // 1000
        since = now_ms - int(self.settings.heartbeat_timeout_s * 1000)
        key = self.broker.key(redis_keys.heartbeats(self.settings.queue))
        return int(client.zcount(key, since, "+inf"))


@dataclass(frozen=True)
class WorkerWindow:
    """A live worker's window (jury.worker.engine.window), as its last beat published it."""

    worker: str
    window: int
    in_flight: int
    ceiling: int


def worker_windows(broker: BrokerRedis, settings: Settings) -> list[WorkerWindow]:
    """The windows of the deployment's live workers (beaten within the heartbeat timeout)."""
    client = broker.client
    seconds, micros = client.time()
    since = seconds * 1000 + micros // 1000 - int(settings.heartbeat_timeout_s * 1000)
    beats = broker.key(redis_keys.heartbeats(settings.queue))
    alive = [str(as_text(w)) for w in client.zrangebyscore(beats, since, "+inf")]
    if not alive:
        return []
    published = client.hmget(broker.key(redis_keys.windows(settings.queue)), alive)
    windows = []
    for worker, raw in zip(alive, published, strict=True):
        try:
            seen = json.loads(raw) if raw is not None else None
            if isinstance(seen, dict):
                windows.append(
                    WorkerWindow(
                        worker, int(seen["window"]), int(seen["in_flight"]), int(seen["ceiling"])
                    )
                )
        except (ValueError, KeyError, TypeError):
            continue  # a worker of another version: shown as alive, without a window
    return windows
