"""kombu's Redis transport for the worker, with one Redis client per channel.

kombu's Redis channel builds a new redis-py client for every command it sends outside its
BRPOP connection (`Channel.conn_or_acquire`, read in kombu 5.7.0: no client given, it calls
`_create_client()`): once for each delivered message's bookkeeping (`QoS.append`) and once
for each ack (`QoS.ack`). A redis-py client builds its table of response callbacks when
created, which cost a worker about 3 % of its CPU per judgment (py-spy, bench/throughput).
A redis-py client is safe to share between threads (each command takes a connection from the
pool and each `pipeline()` is its own object), so this channel builds one per connection
pool and shares it; the commands, their order and their connections are kombu's.

Selected with Celery's `broker_transport` setting (a class path, which kombu's `Connection`
takes over the URL's scheme) for `redis://` and `rediss://` brokers only: TLS comes from
`broker_use_ssl` either way; a `sentinel://` broker keeps kombu's own transport.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kombu.transport import redis as kombu_redis
from redis import exceptions as redis_errors

TRANSPORT_PATH = "jury.worker.broker_transport:Transport"
# The schemes kombu itself maps onto kombu.transport.redis:Transport.
SHARED_CLIENT_SCHEMES = ("redis", "rediss")


class Channel(kombu_redis.Channel):
    _shared_client: Any = None
    _shared_client_pool: Any = None

    @contextmanager
    def conn_or_acquire(self, client: Any = None) -> Iterator[Any]:
        if client:
            yield client
            return
        if self._pool is None and self.connection.client is None:
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


def worker_transport(broker_url: str) -> str | None:
    """Celery's `broker_transport` for a worker on `broker_url`: ours for plain Redis."""
    scheme = broker_url.partition("://")[0].lower()
    return TRANSPORT_PATH if scheme in SHARED_CLIENT_SCHEMES else None
