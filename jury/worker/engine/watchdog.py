"""The lost-task watch: a running batch that has stopped moving while nothing is queued or
held anywhere gets its missing samples queued again.

kombu's Redis transport moves a task from its queue to the `unacked` hash in two steps; a
task popped the instant Redis goes down (a restart, a failover) is in neither and is never
redelivered. So is an adaptive cell's escalation if its worker dies between recording it and
queuing it. Rather than leave such a batch `running` until someone types `jury resume`, the
sweeper checks, once per sweep: when every queue of the deployment, the unacked hash and the
deployment's parked tasks are empty on two sweeps in a row and a running batch stored no new
sample between them, nothing can still be coming for it, and its missing samples are queued
again (a duplicate could only cost a call: the store keeps the first sample).
"""

from __future__ import annotations

import logging

from jury.broker import keys as redis_keys
from jury.broker.parking import Parking
from jury.broker.redis_client import BrokerRedis
from jury.schemas.calls import task_refs
from jury.schemas.tasks import SampleRef
from jury.settings import Settings
from jury.store.generations import ungenerated_refs
from jury.store.missing import missing_samples
from jury.store.provider_batches import open_requests
from jury.store.repository import running_batches
from jury.store.samples import count_batch_samples
from jury.worker.metrics import recording as metrics
from jury.worker.runtime import WorkerRuntime

log = logging.getLogger("jury.sweeper")


def nothing_pending(broker: BrokerRedis, settings: Settings) -> bool:
    """No task waits in a queue of this deployment, sits unacknowledged with a worker, is
    parked for a rate-limit slot (by a worker, or by the producer: producer.pacing), or waits
    in a model's line for an in-flight slot."""
    if broker.queued(settings.all_queues) or broker.client.hlen(broker.unacked_key):
        return False
    return not Parking(broker).holds_any(settings.all_queues)


def this_deployments(broker: BrokerRedis, settings: Settings, batches: list[str]) -> list[str]:
    """Of `batches`, those published to this deployment's queues (the producer marks each
    batch it publishes). Another deployment sharing the database has its own queues, which
    this one cannot see: queuing its batch's missing samples here would judge them twice.
    A batch with no mark (published before marks, or the mark lapsed) is left alone too:
    `jury resume` queues what it lacks."""
    if not batches:
        return []
    marks = broker.client.mget(
        [broker.key(redis_keys.batch_mark(settings.queue, b)) for b in batches]
    )
    queue = settings.queue.encode()
    return [b for b, mark in zip(batches, marks, strict=True) if mark in (queue, settings.queue)]


def idle_key(settings: Settings, batch_id: str) -> str:
    return redis_keys.idle_since(settings.queue, batch_id)


def requeue_lost_tasks(runtime: WorkerRuntime) -> int:
    """Queue again the missing samples of running batches that nothing can still complete;
    returns how many samples were queued."""
    settings, broker = runtime.settings, runtime.redis
    client = broker.client
    batches = running_batches(runtime.sessions, submitting=False)
    if not batches:
        return 0
    if not nothing_pending(broker, settings):
        client.delete(*(broker.key(idle_key(settings, b)) for b in batches))
        return 0
    requeued = 0
    for batch_id in batches:
        if open_requests(runtime.sessions, batch_id):
            continue  # waiting for a provider's batch (docs/batch-api.md), not lost
        stored = count_batch_samples(runtime.sessions, batch_id)
        key = broker.key(idle_key(settings, batch_id))
        seen = client.get(key)
        if seen is None or int(seen) != stored:
            # First idle sweep (or it moved since): look again next time.
            client.set(key, stored, ex=int(max(60, 4 * settings.sweep_interval_s)))
            continue
        client.delete(key)
        requeued += _requeue(runtime, batch_id)
    metrics.tasks_requeued(metrics.LOST, requeued)
    return requeued


def _requeue(runtime: WorkerRuntime, batch_id: str) -> int:
    config = runtime.config(batch_id)
    cells, _ = missing_samples(runtime.sessions, batch_id, config, missing_only=True)
    refs = (
        SampleRef(batch_id, item_id, dimension, judge, index)
        for (item_id, dimension), samples in cells.items()
        for judge, index in samples
    )
    tasks = list(task_refs(config, refs))
    if tasks:
        log.warning(
            "batch %s: nothing queued or running, yet %d samples are missing (a task was lost); "
            "queuing them again",
            batch_id,
            len(tasks),
        )
        runtime.queue_tasks(config, tasks)
    if config.candidates:
        names = [c.name for c in config.candidates]
        lost = ungenerated_refs(runtime.sessions, batch_id, names)
        if lost:
            log.warning(
                "batch %s: nothing queued or running, yet %d items lack their outputs; "
                "queuing their generation again",
                batch_id,
                len({ref.item_id for ref in lost}),
            )
            runtime.queues.publish_generations(lost)
        return len(tasks) + len(lost)
    return len(tasks)
