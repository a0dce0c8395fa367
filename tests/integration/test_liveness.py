"""The engine's heartbeats and ledgers, in process against a real Redis: a dead worker's held
messages go back to their queue under a new tag, once; a live one's stay; and two deployments
sharing a Redis database never reap each other's workers."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator

import pytest

from jury.broker.keys import RATE_LIMIT_PREFIX, model_keys
from jury.broker.parking import Parking
from jury.broker.redis_client import BrokerRedis
from jury.producer.publishing import Publisher, create_producer_app
from jury.schemas.batch import BatchConfig
from jury.schemas.tasks import SampleRef
from jury.settings import Settings
from jury.worker.engine.liveness import HeldMessages, Liveness
from jury.worker.engine.watchdog import nothing_pending, this_deployments
from jury.worker.limits.redis_limiter import RedisRateLimiter

pytestmark = pytest.mark.integration


@pytest.fixture
def deployments(redis_url: str) -> Iterator[tuple[Settings, Settings]]:
    tag = secrets.token_hex(4)
    a, b = (
        Settings(broker_url=redis_url, queue=f"jury-live-{name}-{tag}", heartbeat_timeout_s=0.3)
        for name in ("a", "b")
    )
    yield a, b
    broker = BrokerRedis.from_settings(a)
    for key in broker.client.scan_iter(match=f"*{tag}*"):
        broker.client.delete(key)
    broker.close()


def _fetched(broker: BrokerRedis, settings: Settings, tag: str) -> None:
    """A message as kombu leaves it once a worker fetched it: in `unacked`, stamped."""
    payload = {"body": "x", "properties": {"delivery_tag": tag}, "headers": {}}
    raw = json.dumps([payload, settings.queue, settings.queue])
    broker.client.hset(broker.unacked_key, tag, raw)
    broker.client.zadd(broker.unacked_index_key, {tag: time.time()})


def _worker(settings: Settings, *tags: str) -> Liveness:
    held = HeldMessages()
    for n, tag in enumerate(tags):
        held.received(f"task-{n}", tag)
    liveness = Liveness(settings, BrokerRedis.from_settings(settings), held)
    liveness.beat()
    return liveness


def _reap_when_dead(reaper: Liveness, timeout_s: float = 5) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        reaper.beat()
        moved = reaper.reap()
        if moved:
            return moved
        time.sleep(0.05)  # the reaper's own pace (its lock), not synchronisation
    return 0


def test_a_dead_workers_messages_go_back_once_under_new_tags(
    deployments: tuple[Settings, Settings],
) -> None:
    settings, _ = deployments
    broker = BrokerRedis.from_settings(settings)
    tags = [f"tag-{secrets.token_hex(4)}" for _ in range(3)]
    for tag in tags:
        _fetched(broker, settings, tag)
    _worker(settings, *tags)  # beats once, then never again: dead
    survivor = _worker(settings)
    assert _reap_when_dead(survivor) == 3
    queued = [json.loads(m) for m in broker.client.lrange(broker.key(settings.queue), 0, -1)]
    assert len(queued) == 3 and all(m["headers"]["redelivered"] for m in queued)
    assert {m["properties"]["delivery_tag"] for m in queued}.isdisjoint(tags)
    assert not any(broker.client.hexists(broker.unacked_key, t) for t in tags)
    assert survivor.reap() == 0  # nothing twice


def test_deployments_sharing_a_database_never_reap_each_other(
    deployments: tuple[Settings, Settings],
) -> None:
    mine, theirs = deployments
    broker = BrokerRedis.from_settings(mine)
    tag = f"tag-{secrets.token_hex(4)}"
    _fetched(broker, mine, tag)
    dead = _worker(mine, tag)  # dies holding `tag`
    other_deployment = _worker(theirs)
    assert _reap_when_dead(other_deployment, timeout_s=1.5) == 0
    assert broker.client.hexists(broker.unacked_key, tag), "untouched by the other deployment"
    assert broker.client.sismember(dead.ledger, tag), "its ledger kept for its own deployment"
    survivor = _worker(mine)
    assert _reap_when_dead(survivor) == 1
    assert broker.client.llen(broker.key(mine.queue)) == 1


def test_the_lost_task_watch_counts_a_deployment_s_parked_tasks_and_only_its_own(
    deployments: tuple[Settings, Settings],
) -> None:
    """A batch whose tasks all wait parked for their rate-limit slots (the producer parks a
    tight judge's tasks: producer.pacing) has empty queues and no task in a worker's hands:
    it is not lost, and queuing its missing samples again would pay for every call twice.
    Another deployment's parked tasks, in the same Redis, say nothing about this one."""
    a, b = deployments
    broker = BrokerRedis.from_settings(a)
    parking = Parking(broker)
    member = f"{broker.key(a.all_queues[1])}\n{{}}"
    try:
        assert nothing_pending(broker, a) and nothing_pending(broker, b)
        parking.park(a.all_queues[1], "{}", 3600)
        assert not nothing_pending(broker, a)
        assert nothing_pending(broker, b)
        # The producer's back-pressure counts them the same way.
        assert (parking.count_for(a.all_queues), parking.count_for(b.all_queues)) == (1, 0)
    finally:
        broker.client.zrem(parking.key, member)
        broker.close()


def test_the_lost_task_watch_counts_tasks_waiting_in_a_model_s_line(
    deployments: tuple[Settings, Settings],
) -> None:
    """A task waiting for an in-flight slot waits in its model's line, neither queued, nor
    held, nor parked: after a slot-holder died, for as long as its lease (5 minutes). Such a
    batch is not lost either: queuing its missing samples again at every other sweep would
    pay for each call once more. The producer's back-pressure counts the lines too (a line
    is a model's: whoever's tasks wait in it)."""
    a, b = deployments
    broker = BrokerRedis.from_settings(a)
    parking = Parking(broker)
    limiter = RedisRateLimiter(broker.client, 1.0, lines_key=parking.lines_key)
    line = broker.key(model_keys(RATE_LIMIT_PREFIX, f"test-{a.queue}").waiters)
    try:
        # Someone else's waiter first: no sign of work for either deployment.
        parking.wait_in_line(line, "another-deployment", "{}")
        assert nothing_pending(broker, a) and nothing_pending(broker, b)
        for _ in range(3):
            parking.wait_in_line(line, a.all_queues[1], "{}")
        assert not nothing_pending(broker, a)
        assert nothing_pending(broker, b)
        assert parking.count_for(a.all_queues) == parking.count_for(b.all_queues) == 4
        # The line drains and the sweeper's safety net forgets it; a later waiter brings
        # it back into the set, where the watch finds it again.
        broker.client.delete(line)
        limiter.release_waiters()
        assert not broker.client.sismember(parking.lines_key, line)
        parking.wait_in_line(line, a.all_queues[0], "{}")
        assert broker.client.sismember(parking.lines_key, line)
        assert not nothing_pending(broker, a)
    finally:
        broker.client.delete(line)
        broker.client.srem(parking.lines_key, line)
        broker.close()


def test_the_lost_task_watch_looks_after_its_own_deployment_s_batches_only(
    deployments: tuple[Settings, Settings],
) -> None:
    """Two deployments share a database: each sees the other's running batches, but not the
    queues they wait in. A batch published by one is marked as that deployment's; the other's
    lost-task watch leaves it alone (queuing its missing samples on its own queues would
    judge them twice), and so does it a batch with no mark."""
    a, b = deployments
    tag = a.queue.rsplit("-", 1)[1]
    published, unmarked = f"batch-{tag}", f"unmarked-{tag}"
    config = BatchConfig.model_validate(
        {"judges": [{"model": "openai/x"}], "dimensions": ["relevance"]}
    )
    publisher = Publisher(create_producer_app(a), config)
    broker = BrokerRedis.from_settings(a)
    try:
        publisher.publish([SampleRef(published, "i", "relevance", "openai/x", 0)])
        batches = [published, unmarked]
        assert this_deployments(broker, a, batches) == [published]
        assert this_deployments(broker, b, batches) == []
    finally:
        publisher.close()
        broker.close()
