"""Heartbeats and a per-worker ledger: a dead worker's tasks run again within a minute.

kombu's Redis transport keeps every delivered, unacknowledged message in its `unacked` hash
(tag → payload) and `unacked_index` (tag → fetch time); it gives a message back only once it
is older than the visibility timeout, whether its worker is dead or merely slow. jury follows
dramatiq's Redis broker instead:

- each worker process beats (its deployment's `heartbeats`, a sorted set: worker → Redis time)
  every few seconds, and keeps its ledger (`held:<worker>`, a set; jury.broker.keys) of the
  delivery tags it holds:
  added when Celery receives a message (the `task_received` signal), removed once the task is
  acknowledged;
- a worker silent for `heartbeat_timeout_s` (30 s by default) is dead: any live worker moves
  the messages of its ledger still in `unacked` back to their queues, with a new delivery tag
  (so that the dead worker's late ack, should it come back from a network cut, removes
  nothing), and deletes its ledger;
- an `unacked` message older than the timeout that no live worker's ledger holds (its worker
  died between the fetch and the ledger's next write) goes back the same way, if it belongs to
  this deployment's queues.

A live task is never handed to a second worker however long it runs: its worker beats. kombu's
own visibility timeout stays as a last resort only (an hour by default). One reaper runs at a
time per deployment (a Redis lock). Every key names the deployment's queue: deployments that
share a Redis database (`JURY_QUEUE`) share kombu's `unacked` hash, but a worker of one must
never reap a worker of another — it could not give back its messages (they are not of its
queues), and would delete the ledger that the right deployment needs to.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from jury.broker import keys as redis_keys
from jury.broker.redis_client import BrokerRedis, as_text
from jury.broker.scripts import lua
from jury.settings import Settings
from jury.worker.metrics import recording as metrics

log = logging.getLogger("jury.worker")


class HeldMessages:
    """This process's ledger of delivery tags, written to Redis with each beat."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tags: dict[str, str] = {}  # task id -> delivery tag
        self._added: set[str] = set()
        self._removed: set[str] = set()
        # This process's window (jury.worker.engine.pool), published with each beat.
        self.window_report: Callable[[], dict[str, int]] | None = None

    def received(self, task_id: str, tag: str) -> None:
        with self._lock:
            self._tags[task_id] = tag
            self._added.add(tag)
            self._removed.discard(tag)

    def done(self, task_id: str) -> None:
        with self._lock:
            tag = self._tags.pop(task_id, None)
            if tag is not None:
                self._added.discard(tag)
                self._removed.add(tag)

    def changes(self) -> tuple[set[str], set[str]]:
        with self._lock:
            added, removed = self._added, self._removed
            self._added, self._removed = set(), set()
            return added, removed

    def tags(self) -> set[str]:
        with self._lock:
            return set(self._tags.values())


class Liveness:
    """Beats for this worker, and reaps the dead ones' messages."""

    def __init__(self, settings: Settings, broker: BrokerRedis, held: HeldMessages) -> None:
        self.settings = settings
        self.broker = broker
        self.held = held
        self.worker_id = f"{uuid.uuid4().hex[:12]}"
        self.heartbeats = broker.key(redis_keys.heartbeats(settings.queue))
        self.ledger = self._ledger_of(self.worker_id)
        self.windows = broker.key(redis_keys.windows(settings.queue))
        self.queues = {broker.key(q) for q in settings.all_queues}
        self._beat = broker.client.register_script(lua("heartbeat"))
        self._restore = broker.client.register_script(lua("restore_unacked"))
        self._dead = broker.client.register_script(lua("dead_workers"))
        self._beats = 0

    def beat(self) -> None:
        """Refresh this worker's heartbeat and ledger (its whole ledger now and then, so a
        ledger a reaper deleted during a network cut comes back)."""
        added, removed = self.held.changes()
        self._beats += 1
        with self.broker.client.pipeline(transaction=True) as pipe:
            if self._beats % 12 == 0:
                pipe.delete(self.ledger)
                added = self.held.tags()
                removed = set()
            if added:
                pipe.sadd(self.ledger, *added)
            if removed:
                pipe.srem(self.ledger, *removed)
            if self.held.window_report is not None:
                pipe.hset(self.windows, self.worker_id, json.dumps(self.held.window_report()))
            pipe.execute()
        self._beat(keys=[self.heartbeats], args=[self.worker_id])

    def _ledger_of(self, worker_id: str) -> str:
        return self.broker.key(redis_keys.held(self.settings.queue, worker_id))

    def leave(self) -> None:
        """A warm shutdown: this worker holds nothing any more."""
        with self.broker.client.pipeline() as pipe:
            pipe.zrem(self.heartbeats, self.worker_id)
            pipe.hdel(self.windows, self.worker_id)
            pipe.delete(self.ledger)
            pipe.execute()

    def reap(self) -> int:
        """Give back the messages of dead workers, and orphans; returns how many."""
        client = self.broker.client
        timeout_ms = int(self.settings.heartbeat_timeout_s * 1000)
        lock = self.broker.key(redis_keys.reaper_lock(self.settings.queue))
        if not client.set(lock, self.worker_id, nx=True, px=max(1000, timeout_ms // 6)):
            return 0
        moved = 0
        for raw in self._dead(keys=[self.heartbeats], args=[timeout_ms]):
            dead = as_text(raw)
            ledger = self._ledger_of(dead)
            tags = [as_text(t) for t in client.smembers(ledger)]
            count = sum(self._give_back(tag) for tag in tags)
            client.delete(ledger)
            client.hdel(self.windows, dead)
            client.zrem(self.heartbeats, dead)
            if count:
                log.warning("worker %s went silent: %d of its tasks are queued again", dead, count)
                metrics.tasks_requeued(metrics.DEAD_WORKER, count)
            moved += count
        moved += self._give_back_orphans(timeout_ms / 1000)
        return moved

    def _give_back_orphans(self, timeout_s: float) -> int:
        client = self.broker.client
        # kombu stamps unacked_index with the fetching host's clock (time.time()).
        cutoff = time.time() - timeout_s
        old = {
            as_text(t) for t in client.zrangebyscore(self.broker.unacked_index_key, "-inf", cutoff)
        }
        if not old:
            return 0
        held: set[str] = set()
        for worker in client.zrange(self.heartbeats, 0, -1):
            held |= {as_text(t) for t in client.smembers(self._ledger_of(as_text(worker)))}
        orphans = sorted(old - held)
        count = sum(self._give_back(tag) for tag in orphans)
        if count:
            metrics.tasks_requeued(metrics.ORPHAN, count)
            log.warning(
                "%d tasks fetched by a worker that died before listing them are queued again", count
            )
        return count

    def _give_back(self, tag: str) -> int:
        """Move one unacked message back to its queue under a new delivery tag."""
        raw = self.broker.client.hget(self.broker.unacked_key, tag)
        if raw is None:
            return 0
        payload, _exchange, routing_key = json.loads(raw)
        queue = self.broker.key(str(routing_key))
        if queue not in self.queues:
            return 0  # another deployment's (or application's) message: theirs to restore
        _redelivered(payload)
        moved = self._restore(
            keys=[self.broker.unacked_key, self.broker.unacked_index_key, queue],
            args=[tag, json.dumps(payload)],
        )
        return int(moved)


def _redelivered(payload: dict[str, Any]) -> None:
    """As kombu marks a restored message, and with a tag of its own."""
    payload.setdefault("headers", {})["redelivered"] = True
    properties = payload.setdefault("properties", {})
    properties["delivery_tag"] = str(uuid.uuid4())
    properties.setdefault("delivery_info", {})["redelivered"] = True
