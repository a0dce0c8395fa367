"""The worker's kombu channel shares one redis-py client and sends acks with the next
delivery, and kombu's bookkeeping still holds."""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis
from kombu import Connection, Queue
from kombu.asynchronous import Hub
from kombu.common import ignore_errors

from jury.broker.transport import TRANSPORT_PATH, Channel, worker_transport
from jury.settings import Settings
from jury.worker.app import create_worker_app


def test_plain_redis_brokers_get_the_shared_client_and_sentinel_keeps_kombus() -> None:
    assert worker_transport("redis://127.0.0.1:6379/0") == TRANSPORT_PATH
    assert worker_transport("rediss://cache.example:6380/0") == TRANSPORT_PATH
    assert worker_transport("sentinel://127.0.0.1:26379") is None


def test_the_worker_app_uses_the_channel_with_one_client(redis_url: str) -> None:
    app = create_worker_app(Settings(broker_url=redis_url, queue="jury-transport"))
    with app.connection_for_read() as connection:
        channel = connection.default_channel
        assert isinstance(channel, Channel)
        with channel.conn_or_acquire() as first, channel.conn_or_acquire() as second:
            assert first is second
            assert first.ping()
        channel._disconnect_pools()  # as kombu does after a lost connection
        with channel.conn_or_acquire() as after:
            assert after is not first
            assert after.connection_pool is channel.pool


@contextmanager
def one_delivered_message(redis_url: str) -> Iterator[tuple[Connection, Any, Any, redis.Redis]]:
    """A message put on a queue of its own and delivered through our transport, not acked:
    (connection, queue, message, a plain Redis client). Its traces are removed after."""
    queue = f"jury-transport-{secrets.token_hex(3)}"
    raw = redis.Redis.from_url(redis_url)
    try:
        with Connection(redis_url, transport=TRANSPORT_PATH) as connection:
            simple = connection.SimpleQueue(queue)
            simple.put({"n": 1})
            message = simple.get(timeout=5)
            try:
                yield connection, simple, message, raw
            finally:
                raw.hdel("unacked", message.delivery_tag)
                raw.zrem("unacked_index", message.delivery_tag)
    finally:
        raw.delete(queue)
        raw.close()


def test_delivery_and_ack_keep_kombus_unacked_hash(redis_url: str) -> None:
    """A delivered message is in kombu's `unacked` hash until its ack, both written through
    the shared client: what the liveness ledger and the sweeper read."""
    with one_delivered_message(redis_url) as (_, simple, message, raw):
        assert message.payload == {"n": 1}
        tag = message.delivery_tag
        assert raw.hexists("unacked", tag)
        assert raw.zscore("unacked_index", tag) is not None
        message.ack()
        assert not raw.hexists("unacked", tag)
        assert raw.zscore("unacked_index", tag) is None
        simple.close()


def test_closing_a_channel_whose_connection_is_gone_is_quiet(redis_url: str) -> None:
    """After a lost broker connection Celery closes the channel, ignoring connection errors.
    kombu's channel then tried to build a pool from the gone connection (AttributeError: the
    worker stopped with "Unrecoverable error" when Redis restarted). Ours raises a connection
    error there, and the delivered message stays in the `unacked` hash, to be given back."""
    with one_delivered_message(redis_url) as (connection, simple, message, raw):
        channel = simple.channel
        channel._disconnect_pools()  # as after a lost connection...
        channel.connection.client = None  # ...whose kombu Connection is released
        ignore_errors(connection, channel.close)  # Celery's close path: nothing escapes
        assert raw.hexists("unacked", message.delivery_tag)


def test_in_the_event_loop_an_ack_rides_with_the_next_delivery(redis_url: str) -> None:
    """In a worker (an event loop registered, acks in its thread), an ack is done in memory
    at once and leaves the `unacked` hash in the next delivery's pipeline, or within
    ACK_DELAY_S when none comes; closing the channel sends what is still pending. Outside
    the loop's thread an ack is kombu's, at once."""
    queue = f"jury-transport-{secrets.token_hex(3)}"
    raw = redis.Redis.from_url(redis_url)
    tags: list[str] = []
    try:
        with Connection(redis_url, transport=TRANSPORT_PATH) as connection:
            simple = connection.SimpleQueue(queue)
            hub = Hub()
            connection.transport.register_with_event_loop(connection.connection, hub)

            def delivered() -> Any:
                simple.put({"n": len(tags)})  # one at a time: none is taken with another
                message = simple.get(timeout=5)
                tags.append(message.delivery_tag)
                assert raw.hexists("unacked", message.delivery_tag)
                return message

            first = delivered()
            first.ack()
            assert raw.hexists("unacked", first.delivery_tag)  # pending...
            assert simple.channel.qos.can_consume()  # ...but acked for the prefetch count
            second = delivered()
            assert not raw.hexists("unacked", first.delivery_tag)  # rode with the delivery
            assert raw.zscore("unacked_index", first.delivery_tag) is None
            second.ack()
            deadline = time.monotonic() + 5
            while raw.hexists("unacked", second.delivery_tag) and time.monotonic() < deadline:
                hub.fire_timers(propagate=(Exception,))  # what the worker's hub loop does
                time.sleep(0.01)
            assert not raw.hexists("unacked", second.delivery_tag)  # on its own, in time
            third = delivered()
            outside: list[BaseException] = []
            thread = threading.Thread(target=lambda: _ack_into(third, outside))
            thread.start()
            thread.join(10)
            assert not outside and not raw.hexists("unacked", third.delivery_tag)
            fourth = delivered()
            fourth.ack()
            assert raw.hexists("unacked", fourth.delivery_tag)
            simple.channel.close()  # as at a warm shutdown: the pending ack is sent
            assert not raw.hexists("unacked", fourth.delivery_tag)
            assert raw.zscore("unacked_index", fourth.delivery_tag) is None
    finally:
        for tag in tags:
            raw.hdel("unacked", tag)
            raw.zrem("unacked_index", tag)
        raw.delete(queue)
        raw.close()


def _ack_into(message: Any, errors: list[BaseException]) -> None:
    try:
        message.ack()
    except BaseException as exc:
        errors.append(exc)


def test_an_ack_on_a_channel_closed_after_a_lost_connection_is_not_fatal(redis_url: str) -> None:
    """After a lost connection Celery closes the channel (kombu's `close_channel` leaves it
    without a connection) and may still ack a task that finished on it. That ack must fail
    as a connection error, which Celery logs, or succeed; an AttributeError stopped the worker
    ("Unrecoverable error", seen when Redis restarted under load)."""
    with one_delivered_message(redis_url) as (connection, simple, message, _):
        hub = Hub()
        connection.transport.register_with_event_loop(connection.connection, hub)
        channel = simple.channel
        channel.close()
        assert channel.connection is None
        errors = connection.connection_errors + connection.channel_errors
        message.ack_log_error(logging.getLogger("test"), errors)  # Celery's way: no raise


@contextmanager
def a_queue_of_its_own(
    redis_url: str, prefix: str = ""
) -> Iterator[tuple[str, redis.Redis, Connection]]:
    """A queue name, a plain Redis client and a connection through our transport (under the
    broker key prefix `prefix`); the queue and its messages' traces in kombu's `unacked` hash
    and index are removed after."""
    queue = f"jury-transport-{secrets.token_hex(3)}"
    raw = redis.Redis.from_url(redis_url)
    unacked_before = set(raw.hkeys(prefix + "unacked"))
    options = {"global_keyprefix": prefix} if prefix else {}
    try:
        with Connection(redis_url, transport=TRANSPORT_PATH, transport_options=options) as conn:
            yield queue, raw, conn
    finally:
        for tag in set(raw.hkeys(prefix + "unacked")) - unacked_before:
            if queue.encode() in (raw.hget(prefix + "unacked", tag) or b""):
                raw.hdel(prefix + "unacked", tag)
                raw.zrem(prefix + "unacked_index", tag)
        raw.delete(prefix + queue)
        raw.close()


def put(connection: Connection, queue: str, payloads: list[dict[str, Any]]) -> Any:
    """Put `payloads` on `queue` in order; returns the SimpleQueue, open."""
    simple = connection.SimpleQueue(queue)
    for payload in payloads:
        simple.put(payload)
    return simple


def test_a_delivery_takes_the_waiting_messages_each_recorded_as_kombu_records_one(
    redis_url: str,
) -> None:
    """BRPOP's delivery takes as many more waiting messages as the prefetch count has room
    for, in the same round trip, each in `unacked` as kombu writes it: kombu gives them back
    as it gives back its own."""
    with a_queue_of_its_own(redis_url) as (queue, raw, connection):
        simple = put(connection, queue, [{"n": n} for n in range(6)])
        simple.consumer.qos(prefetch_count=4)
        first = simple.get(timeout=5)
        assert raw.llen(queue) == 2  # one by BRPOP, three taken: the prefetch count's room
        messages = [first] + [simple.get(timeout=5) for _ in range(3)]
        assert [message.payload["n"] for message in messages] == [0, 1, 2, 3]
        for message in messages:
            unacked = raw.hget("unacked", message.delivery_tag)
            assert unacked is not None
            recorded = json.loads(unacked)
            delivery = message.delivery_info
            assert recorded == [message._raw, delivery["exchange"], delivery["routing_key"]]
            score = raw.zscore("unacked_index", message.delivery_tag)
            assert score is not None and abs(score - time.time()) < 60
        simple.channel.qos.restore_unacked()  # as kombu does for a closing channel
        assert raw.llen(queue) == 6
        assert not any(raw.hexists("unacked", message.delivery_tag) for message in messages)


def test_taking_keeps_the_brokers_global_key_prefix(redis_url: str) -> None:
    prefix = f"jury-test-{secrets.token_hex(3)}:"
    with a_queue_of_its_own(redis_url, prefix) as (queue, raw, connection):
        simple = put(connection, queue, [{"n": n} for n in range(3)])
        messages = [simple.get(timeout=5) for _ in range(3)]
        assert [message.payload["n"] for message in messages] == [0, 1, 2]
        assert raw.llen(prefix + queue) == 0
        for message in messages:
            assert raw.hexists(prefix + "unacked", message.delivery_tag)
            assert raw.zscore(prefix + "unacked_index", message.delivery_tag) is not None
            assert not raw.hexists("unacked", message.delivery_tag)
        assert not raw.exists(queue)
    raw.delete(prefix + "unacked", prefix + "unacked_index")


def test_a_message_without_a_delivery_tag_stops_the_taking_and_stays_first(
    redis_url: str,
) -> None:
    """Garbage on a queue is not taken: it stays where it was, first in line, for kombu's own
    delivery to deal with as before; the good message ahead of it is delivered."""
    with a_queue_of_its_own(redis_url) as (queue, raw, connection):
        simple = put(connection, queue, [{"n": 0}])
        raw.lpush(queue, b'{"properties": "not a message"}')
        simple.put({"n": 1})
        assert simple.get(timeout=5).payload == {"n": 0}
        assert raw.llen(queue) == 2
        assert raw.lindex(queue, -1) == b'{"properties": "not a message"}'


def test_taken_messages_not_yet_delivered_go_back_when_a_delivery_fails(redis_url: str) -> None:
    """A consumer's callback that raises stops the delivery of the taken messages after it:
    they go back to the head of their queue, in order, and leave `unacked`."""
    with a_queue_of_its_own(redis_url) as (queue, raw, connection):
        put(connection, queue, [{"n": n} for n in range(4)]).close()
        seen: list[int] = []

        def fail_on_the_second(body: dict[str, int], message: Any) -> None:
            seen.append(body["n"])
            if body["n"] == 1:
                raise RuntimeError("the consumer failed")

        channel = connection.channel()
        with (
            connection.Consumer([Queue(queue)], channel, callbacks=[fail_on_the_second]),
            pytest.raises(RuntimeError, match="the consumer failed"),
        ):
            connection.drain_events(timeout=5)
        assert seen == [0, 1]
        left = [channel.decode_body(*_body_of(item)) for item in raw.lrange(queue, 0, -1)]
        assert left == [b'{"n": 3}', b'{"n": 2}']  # 2 is next, as before the taking
        for item in raw.lrange(queue, 0, -1):
            assert not raw.hexists("unacked", json.loads(item)["properties"]["delivery_tag"])
        channel.close()


def _body_of(item: bytes | str) -> tuple[str, str]:
    payload = json.loads(item)
    return payload["body"], payload["properties"]["body_encoding"]


def test_taking_turns_between_queues_as_kombus_brpop_does(redis_url: str) -> None:
    """A worker consumes several queues (a deployment's lanes, one per judge, so that a slow
    judge cannot hold up a fast one): the messages taken come from each queue in turn."""
    with (
        a_queue_of_its_own(redis_url) as (first, raw, connection),
        a_queue_of_its_own(redis_url) as (second, _, _),
    ):
        channel = connection.channel()
        for queue in (first, second):
            put(connection, queue, [{"queue": queue, "n": n} for n in range(4)]).close()
        seen: list[tuple[str, int]] = []

        def record(body: dict[str, Any], message: Any) -> None:
            seen.append((body["queue"], body["n"]))

        queues = [Queue(first), Queue(second)]
        with connection.Consumer(queues, channel, callbacks=[record], prefetch_count=5):
            connection.drain_events(timeout=5)  # one BRPOP, and what its delivery took
        assert seen == [(first, 0), (second, 0), (first, 1), (second, 1), (first, 2)]
        assert raw.llen(first) == 1 and raw.llen(second) == 2
        channel.close()
