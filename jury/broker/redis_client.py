"""The one factory for the Redis clients jury makes, honouring what Celery honours.

Celery reaches Redis through kombu's Redis transport, which understands `redis://`,
`rediss://` with `broker_use_ssl`, `sentinel://` with a `master_name` transport option, and a
`global_keyprefix` transport option that prefixes every key it touches. jury talks to the same
Redis directly too (the producer writes judge messages, the rate limiter, the budget meter, the
sweeper and progress read and write keys), so its clients are built from kombu's own: a kombu
Connection made with Celery's broker settings opens a channel, and jury's client shares that
channel's connection pool (kombu's `Channel.pool`, so TLS and sentinel settings are kombu's),
while the key prefix is applied by `BrokerRedis.key` to every key jury names, kombu's queues
and `unacked` hash included (kombu's PrefixedStrictRedis only prefixes the first key of a
script, and jury's scripts use several). A broker URL that is not Redis is refused at start,
in one paragraph, never half-applied.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from celery import Celery
from kombu import Connection

from jury.broker import keys as redis_keys
from jury.errors import ConfigurationError
from jury.settings import Settings


@dataclass
class BrokerRedis:
    """A Redis client on the broker, and the names of the keys it shares with kombu."""

    client: redis.Redis
    prefix: str
    # kombu's unacknowledged-message hash and its index (transport options may rename them).
    unacked_key: str
    unacked_index_key: str
    connection: Any = None  # the kombu Connection whose pool the client uses

    def key(self, name: str) -> str:
        """A key jury names, under the broker's global_keyprefix."""
        return self.prefix + name

    @classmethod
    def from_settings(cls, settings: Settings, socket_timeout: float = 10) -> BrokerRedis:
        config = settings.celery_config()
        return cls.from_celery_config(config, socket_timeout, settings.broker_url_source())

    @classmethod
    def from_app(cls, app: Celery, socket_timeout: float = 10) -> BrokerRedis:
        """The client for a Celery app's broker, as its own configuration names it."""
        return cls.from_celery_config(app.conf, socket_timeout)

    @classmethod
    def from_celery_config(
        cls, config: Mapping[str, Any], socket_timeout: float, source: str = "JURY_BROKER_URL"
    ) -> BrokerRedis:
        """`source`: where the broker URL came from, as the errors name it."""
        options = dict(config.get("broker_transport_options") or {})
        if problem := broker_kind_problem(str(config["broker_url"]), source):
            raise ConfigurationError(problem)
        connection = Connection(
            str(config["broker_url"]),
            transport_options={**options, "socket_timeout": socket_timeout},
            ssl=config.get("broker_use_ssl") or False,
        )
        try:
            channel = connection.default_channel
        except Exception as exc:
            connection.release()
            reason = " ".join(str(exc).split()).rstrip(".")  # one line, whatever it said
            raise ConfigurationError(
                f"cannot reach Redis at {connection.as_uri()} ({source}): {reason}. "
                "Start Redis, or point JURY_BROKER_URL at one."
            ) from None
        prefix = str(options.get("global_keyprefix") or "")
        # kombu's Redis Channel: its (non-asynchronous) pool carries kombu's TLS and sentinel
        # connection settings; its unacked key names honour the transport options.
        pool: redis.ConnectionPool = getattr(channel, "pool")  # noqa: B009
        return cls(
            client=redis.Redis(connection_pool=pool),
            prefix=prefix,
            unacked_key=prefix + str(getattr(channel, "unacked_key")),  # noqa: B009
            unacked_index_key=prefix + str(getattr(channel, "unacked_index_key")),  # noqa: B009
            connection=connection,
        )

    def forget_batch(self, queue: str, batch_id: str) -> None:
        """Delete every key of a batch that has ended (its mark, its budget meter, what its
        submission left): nothing reads them once it is done. A batch run again (`jury
        resume`) is marked again as its tasks are queued, and its meter is rebuilt from the
        store on its first call."""
        self.client.delete(*(self.key(k) for k in redis_keys.all_of_batch(queue, batch_id)))

    def queued(self, queues: Sequence[str]) -> int:
        """Messages waiting in `queues` (plain queue names), in one round trip."""
        with self.client.pipeline(transaction=False) as pipe:
            for queue in queues:
                pipe.llen(self.key(queue))
            return sum(pipe.execute())

    def close(self) -> None:
        self.client.close()
        if self.connection is not None:
            self.connection.release()


def broker_kind_problem(url: str, source: str = "JURY_BROKER_URL") -> str | None:
    """Why the broker at `url` is not one jury can use, if it is not Redis; connects to
    nothing."""
    try:
        connection = Connection(url)
        driver, shown = connection.transport.driver_type, connection.as_uri()
    except Exception as exc:  # a scheme kombu does not know
        driver, shown = f"unknown ({exc})", url.partition("://")[0] + "://…"
    if driver == "redis":
        return None
    return (
        f"the broker {shown} ({source}) is {driver}; jury needs Redis (redis://, rediss:// or "
        "sentinel://): its rate limits, budget meter and recovery of dead workers' tasks live "
        "there"
    )


def as_text(value: Any) -> str:
    """A reply of the undecoding client (bytes), or a value given as text, as text."""
    return value.decode() if isinstance(value, bytes) else str(value)


def outage(exc: BaseException) -> str | None:
    """One line saying Redis or the database cannot be reached, when that is what `exc` is;
    else None. A background step that meets an outage (a host cut off, a restart) says so in
    one line and tries again: a traceback would bury the log in the same twenty lines."""
    import sqlalchemy.exc  # the store's engine has it loaded already

    if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
        return f"Redis unreachable: {exc}"
    if isinstance(exc, sqlalchemy.exc.OperationalError):
        return f"database unreachable: {str(exc.orig or exc).splitlines()[0]}"
    return None


def log_step_failure(log: logging.Logger, what: str, exc: BaseException) -> None:
    """A background step failed and will be tried again: an outage in one line, our own bug
    with its traceback."""
    if (line := outage(exc)) is not None:
        log.warning("%s failed (%s); trying again soon", what, line)
    else:
        log.error("%s failed; trying again soon", what, exc_info=exc)
