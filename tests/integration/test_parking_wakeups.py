"""The housekeeper sleeps until parked work falls due (jury.worker.engine.housekeeping): the
parked set's release says when its next message is due and whether any model has a waiting
line, and a park in this process wakes a housekeeper sleeping past its message's due time."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator

import pytest
import redis

from jury.broker import keys as redis_keys
from jury.broker.parking import PARKED_HERE, Parking
from jury.broker.redis_client import BrokerRedis

pytestmark = pytest.mark.integration


@pytest.fixture
def parking(redis_url: str) -> Iterator[Parking]:
    """Parking under a key prefix of its own, its keys deleted afterwards."""
    client = redis.Redis.from_url(redis_url)
    prefix = f"parking-test-{secrets.token_hex(4)}:"
    broker = BrokerRedis(client, prefix, prefix + "unacked", prefix + "unacked_index")
    yield Parking(broker)
    for key in client.scan_iter(f"{prefix}*"):
        client.delete(key)
    client.close()


def test_a_release_says_when_the_next_parked_message_is_due(parking: Parking) -> None:
    assert parking.release().next_due_s is None, "nothing parked: nothing to wake for"
    parking.park("q", "now", 0)
    parking.park("q", "later", 3600)
    released = parking.release()
    assert released.moved == 1
    assert released.next_due_s is not None and 3500 < released.next_due_s <= 3600
    queue = parking.broker.key("q")
    assert parking.broker.client.lrange(queue, 0, -1) == [b"now"]
    assert released.lines == 0
    line = parking.broker.key(redis_keys.model_keys(redis_keys.RATE_LIMIT_PREFIX, "m").waiters)
    parking.wait_in_line(line, "q", "waiting")
    assert parking.release().lines == 1, "a waiting line: its safety net must run"


def test_a_park_here_wakes_a_housekeeper_sleeping_past_its_due_time(parking: Parking) -> None:
    woke = threading.Event()

    def sleeper() -> None:
        PARKED_HERE.wait_until(time.monotonic() + 3600)
        woke.set()

    thread = threading.Thread(target=sleeper, daemon=True)
    thread.start()
    parking.park("q", "soon", 0)
    assert woke.wait(30), "the park did not wake the sleeper"
    thread.join(5)
