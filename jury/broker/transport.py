"""kombu's Redis transport for the worker: one Redis client per channel, acks sent with the
next delivery's bookkeeping.

kombu's Redis channel builds a new redis-py client for every command it sends outside its
BRPOP connection (`Channel.conn_or_acquire`, read in kombu 5.7.0: no client given, it calls
`_create_client()`): once for each delivered message's bookkeeping (`QoS.append`) and once
for each ack (`QoS.ack`). A redis-py client builds its table of response callbacks when
created, which cost a worker about 3 % of its CPU per judgment (py-spy, bench/throughput).
A redis-py client is safe to share between threads (each command takes a connection from the
pool and each `pipeline()` is its own object), so this channel builds one per connection
pool and shares it; the commands, their order and their connections are kombu's.

Each delivery and each ack costs kombu a round trip to Redis on the consumer's thread (a
MULTI/ZADD/HSET/EXEC pipeline, then MULTI/ZREM/HDEL/EXEC). In a worker with an event loop
(Celery's hub; acks run there, scheduled by `Consumer.call_soon_ack` in celery 5.7.0), an
ack here is done in memory at once, as kombu's virtual QoS does, and its removal from the
`unacked` hash rides in the next delivery's pipeline, or leaves on its own within ACK_DELAY_S
when no delivery comes; closing the channel sends what is pending. A crash before that leaves
those messages in `unacked`: given back by the liveness reaper and delivered again, they
store nothing twice (the samples' unique keys), so no work is lost or doubled. Anywhere else
(the producer, tests, another thread, a channel closed after a lost connection), acks are
kombu's, one round trip each.

A delivery taken by BRPOP also takes, in its bookkeeping's round trip, up to BATCH_TAKE_MAX
more messages waiting on the channel's queues (as many as the prefetch count leaves room
for), each recorded in `unacked` by the same Lua script that pops it. kombu pops a message,
then records it: a worker killed between the two loses that message. The taken messages have
no such window; the first, popped by BRPOP, keeps kombu's. One BRPOP and one pipeline per
message were a fifth of a loaded worker's CPU (py-spy, bench/concurrency).

Selected with Celery's `broker_transport` setting (a class path, which kombu's `Connection`
takes over the URL's scheme) for `redis://` and `rediss://` brokers only: TLS comes from
`broker_use_ssl` either way; a `sentinel://` broker keeps kombu's own transport.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kombu.transport import redis as kombu_redis
from kombu.transport import virtual
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import dumps, loads
from redis import exceptions as redis_errors

from jury.broker.scripts import lua

TRANSPORT_PATH = "jury.broker.transport:Transport"
# The kombu minor versions this module was read against (its private methods: `_brpop_read`,
# `_q_for_pri`, `QoS._remove_from_indices` …). pyproject.toml allows only these.
KOMBU_READ_AGAINST = ("5.7",)
# The schemes kombu itself maps onto kombu.transport.redis:Transport.
SHARED_CLIENT_SCHEMES = ("redis", "rediss")
# The longest an ack waits for a delivery to share its round trip with.
ACK_DELAY_S = 0.05
# The most messages one BRPOP's bookkeeping takes besides the one BRPOP returned.
BATCH_TAKE_MAX = 64

log = logging.getLogger("jury.worker")


class QoS(kombu_redis.QoS):
    """kombu's Redis QoS (read in kombu 5.7.0: `append`, `ack`, `_remove_from_indices`,
    `restore_unacked`), whose acks reach Redis with the next delivery's bookkeeping."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending_acks: list[str] = []
        self._recorded: set[str] = set()  # taken by take_messages.lua, in `unacked` already

    def ack(self, delivery_tag: str) -> None:
        # A channel closed after a lost connection has none (kombu's `close_channel`); Celery
        # may still ack a task that finished on it: kombu's own ack, as before.
        transport = self.channel.connection
        hub = transport.ack_hub() if transport is not None else None
        if hub is None:
            super().ack(delivery_tag)
            return
        virtual.QoS.ack(self, delivery_tag)  # kombu's in-memory ack: the prefetch count
        self._pending_acks.append(delivery_tag)
        if len(self._pending_acks) == 1:
            hub.call_later(ACK_DELAY_S, self.send_acks)

    def append(self, message: Any, delivery_tag: str) -> None:
        """kombu's bookkeeping of a delivery, with the pending acks in the same pipeline and,
        for a delivery by BRPOP, the taking of more messages (`Channel.take_request`)."""
        if delivery_tag in self._recorded:
            self._recorded.discard(delivery_tag)
            virtual.QoS.append(self, message, delivery_tag)
            return
        acks, self._pending_acks = self._pending_acks, []
        delivery = message.delivery_info
        unacked = dumps([message._raw, delivery["exchange"], delivery["routing_key"]])
        now = time.time()
        take = self.channel.take_request(self.can_consume_max_estimate())
        try:
            with self.pipe_or_acquire() as pipe:
                for tag in acks:
                    self._remove_from_indices(tag, pipe)
                pipe.zadd(self.unacked_index_key, {delivery_tag: now})
                pipe.hset(self.unacked_key, delivery_tag, unacked)
                if take is not None:
                    count, queues, keys, per_level = take
                    prefix = self.channel.global_keyprefix
                    # EVAL, which kombu's prefixing client leaves as it is: every key is
                    # prefixed here (kombu 5.7.0 prefixes only the first key of an EVALSHA).
                    unacked_keys = [prefix + self.unacked_key, prefix + self.unacked_index_key]
                    pipe.eval(
                        lua("take_messages"),
                        2 + len(keys),
                        *unacked_keys,
                        *keys,
                        count,
                        now,
                        per_level,
                    )
                replies = pipe.execute()
        except BaseException:
            self._pending_acks[:0] = acks
            raise
        virtual.QoS.append(self, message, delivery_tag)
        if take is not None:
            self.channel.hold_taken(queues, replies[-1])

    def send_acks(self) -> None:
        """Send the pending acks' removals from the `unacked` hash, if no delivery took them."""
        acks, self._pending_acks = self._pending_acks, []
        if not acks:
            return
        try:
            with self.pipe_or_acquire() as pipe:
                for tag in acks:
                    self._remove_from_indices(tag, pipe)
                pipe.execute()
        except Exception as exc:
            # Left in `unacked`: given back by the reaper, delivered again, stored once.
            log.warning(
                "could not send %d acks to Redis (%s): their tasks will be delivered again "
                "and store nothing twice",
                len(acks),
                exc,
            )

    def restore_unacked(self, client: Any = None) -> Any:
        self.send_acks()
        return super().restore_unacked(client)

    def restore_unacked_once(self, stderr: Any = None) -> Any:
        self.send_acks()  # kombu restores only when something is unacked; acks go regardless
        return super().restore_unacked_once(stderr)


class Channel(kombu_redis.Channel):
    QoS = QoS
    _shared_client: Any = None
    _shared_client_pool: Any = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._taken: deque[tuple[str, dict[str, Any]]] = deque()  # (queue, payload)
        self._brpop_reader: int | None = None  # the thread in `_brpop_read`
        super().__init__(*args, **kwargs)

    def _brpop_read(self, **options: Any) -> Any:
        """kombu's read of a BRPOP reply, which delivers one message; then the messages its
        bookkeeping took (`QoS.append`), each delivered as kombu delivers one."""
        self._brpop_reader = threading.get_ident()
        try:
            try:
                delivered = super()._brpop_read(**options)
            finally:
                self._brpop_reader = None
            while self._taken:
                queue, payload = self._taken.popleft()
                self.connection._deliver(payload, queue)
        except BaseException:
            self._give_back_taken()  # those not delivered yet, from either step
            raise
        return delivered

    def take_request(self, room: int | None) -> tuple[int, list[str], list[str], int] | None:
        """What the bookkeeping of a delivery by BRPOP may take besides: (how many, each
        key's queue, the keys, prefixed, in BRPOP's order, the queues to a priority level);
        None for any other delivery, or when `room` (the prefetch count's, before this
        delivery; None: unlimited) is full."""
        if self._brpop_reader != threading.get_ident():
            return None
        count = BATCH_TAKE_MAX if room is None else min(BATCH_TAKE_MAX, room - 1)
        if count <= 0:
            return None
        queues = self._queue_cycle.consume(len(self.active_queues))
        if not queues:
            # A stopping consumer has no queues left: nothing to take. (The script once
            # looped forever on a step of 0, and every client of Redis met BUSY.)
            return None
        pairs = [
            (queue, self._q_for_pri(queue, pri)) for pri in self.priority_steps for queue in queues
        ]
        keys = [self.global_keyprefix + key for _, key in pairs]
        return count, [queue for queue, _ in pairs], keys, len(queues)

    def hold_taken(self, queues: list[str], reply: list[Any]) -> None:
        """Keep the messages take_messages.lua returned, to deliver after BRPOP's own."""
        for number, item in zip(reply[::2], reply[1::2], strict=True):
            payload = loads(bytes_to_str(item))
            self.qos._recorded.add(payload["properties"]["delivery_tag"])
            self._taken.append((queues[int(number) - 1], payload))

    def _give_back_taken(self) -> None:
        """Put taken messages not delivered back at the head of their queues."""
        while self._taken:
            _, payload = self._taken.pop()  # the last first: each goes ahead of the rest
            tag = payload["properties"]["delivery_tag"]
            self.qos._recorded.discard(tag)
            try:
                self.qos.restore_by_tag(tag)
            except Exception as exc:
                # Left in `unacked` and in no worker's ledger: the reaper gives it back.
                log.warning("could not give back a taken message (%s)", exc)

    @contextmanager
    def conn_or_acquire(self, client: Any = None) -> Iterator[Any]:
        if client:
            yield client
            return
        if self._pool is None and (self.connection is None or self.connection.client is None):
            # The broker connection is closed and gone: kombu would build a pool from it and
            # fail with an AttributeError (kombu issues #582, #970) that Celery's close path
            # does not ignore, and the worker stopped with "Unrecoverable error" when Redis
            # restarted (seen once in the suite). A connection error is what that path
            # ignores; the unacknowledged messages stay in Redis' `unacked` hash, given back
            # by the visibility timeout or the dead worker's heartbeat.
            raise redis_errors.ConnectionError("the broker connection is closed")
        pool = self.pool  # kombu replaces it after a lost connection: follow it
        if self._shared_client is None or self._shared_client_pool is not pool:
            self._shared_client = self._create_client()
            self._shared_client_pool = pool
        yield self._shared_client


class Transport(kombu_redis.Transport):
    Channel = Channel
    _hub: Any = None
    _hub_thread: int | None = None

    def register_with_event_loop(self, connection: Any, loop: Any) -> None:
        super().register_with_event_loop(connection, loop)
        self._hub, self._hub_thread = loop, threading.get_ident()

    def ack_hub(self) -> Any:
        """The event loop acks wait on, when called in its thread; None: ack at once."""
        if self._hub is not None and threading.get_ident() == self._hub_thread:
            return self._hub
        return None


def worker_transport(broker_url: str) -> str | None:
    """Celery's `broker_transport` for a worker on `broker_url`: ours for plain Redis."""
    scheme = broker_url.partition("://")[0].lower()
    return TRANSPORT_PATH if scheme in SHARED_CLIENT_SCHEMES else None
