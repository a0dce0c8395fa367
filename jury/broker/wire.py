"""Task messages written straight onto Redis, many per round trip.

Celery's `send_task` costs about a millisecond per task here (signature, routing, one Redis
round trip each): a million-judgment batch would take a quarter of an hour to enqueue. The
consuming side stays plain Celery; the producer (and a worker queuing an escalation, a lost task
or a chord callback) writes its messages itself, in Celery's task protocol 2 and kombu's Redis
envelope, taken from Celery's own `as_task_v2` once and filled in per task. A wave of messages
goes to Redis in one MULTI/EXEC together with the submission cursor, so a producer that dies
leaves either the whole wave and its cursor or neither."""

from __future__ import annotations

import json
import secrets
import socket
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from celery import Celery
from celery.utils.saferepr import saferepr

from jury.broker.keys import BATCH_MARK_TTL_S
from jury.broker.parking import Parking
from jury.broker.redis_client import BrokerRedis
from jury.schemas.tasks import JUDGE_TASK

# Celery's own bound on argsrepr (celery.app.amqp.AMQP.argsrepr_maxsize).
ARGSREPR_MAXSIZE = 1024
# Compact separators: the envelope is JSON inside JSON; every byte is paid per queued task.
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


class TaskMessageWriter:
    """Builds the Redis list entry of one task (a judge task by default, or a chord callback),
    as kombu would have written it. tests/integration/test_store_and_wire.py compares it field by
    field
    with what Celery's own `send_task` writes."""

    def __init__(self, app: Celery, task_name: str = JUDGE_TASK) -> None:
        headers, properties, _body, _event = app.amqp.as_task_v2(
            "x", task_name, args=(), kwargs={}, ignore_result=True, origin=_origin()
        )
        self._headers: dict[str, Any] = dict(headers)
        self._properties: dict[str, Any] = {
            # No reply_to: nobody waits on a judge task's result.
            k: v
            for k, v in dict(properties).items()
            if k not in ("reply_to", "correlation_id")
        }
        self._properties.update(delivery_mode=2, priority=0, body_encoding=None)
        self._embed = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}

    def message(
        self, ref: tuple[str | int, ...], queue: str, kwargs: dict[str, Any] | None = None
    ) -> str:
        """The entry of one task with `ref` (a SampleRef or a CellRef) as its arguments (and
        `kwargs`: what a parked task carries forward)."""
        task_id = short_task_id()
        args = list(ref)
        headers = {
            **self._headers,
            "id": task_id,
            "root_id": task_id,
            # What Flower and the worker's log show: batch, item, dimension (, judge, sample).
            "argsrepr": saferepr(args, ARGSREPR_MAXSIZE),
        }
        if kwargs:
            # Only what the task carries forward, never samples' text: their count.
            headers["kwargsrepr"] = saferepr(_summary(kwargs), ARGSREPR_MAXSIZE)
        properties = {
            **self._properties,
            "correlation_id": task_id,
            "delivery_info": {"exchange": "", "routing_key": queue},
            "delivery_tag": str(uuid.uuid4()),
        }
        return _dumps(
            {
                "body": _dumps([args, kwargs or {}, self._embed]),
                "content-encoding": "utf-8",
                "content-type": "application/json",
                "headers": headers,
                "properties": properties,
            }
        )


def _summary(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: (f"{len(v)} samples" if isinstance(v, list) else v) for k, v in kwargs.items()}


def short_task_id() -> str:
    """96 random bits in 16 characters: a UUID's 36 would appear several times per message."""
    return secrets.token_urlsafe(12)


def _origin() -> str:
    return f"jury-producer@{socket.gethostname()}"


def push_wave(
    broker: BrokerRedis,
    messages: Mapping[str, Iterable[str]],
    cursor: tuple[str, int, int] | None = None,
    parked: Sequence[tuple[str, str, float]] = (),
    marks: Mapping[str, str] | None = None,
) -> None:
    """LPUSH each queue's messages (kombu's workers BRPOP: first in, first out) and, in the
    same transaction, park each of `parked` (queue, message, delay_s: jury.broker.parking),
    set `cursor` = (key, value, ttl seconds) and each of `marks` (key: value, for
    BATCH_MARK_TTL_S). Queue and key names are put under the broker's key prefix, as
    kombu puts its own."""
    with broker.client.pipeline(transaction=True) as pipe:
        for queue, entries in messages.items():
            entries = list(entries)
            if entries:
                pipe.lpush(broker.key(queue), *entries)
        if parked:
            Parking(broker).park_all(parked, pipe)
        for mark, deployment in (marks or {}).items():
            pipe.set(broker.key(mark), deployment, ex=BATCH_MARK_TTL_S)
        if cursor is not None:
            key, value, ttl = cursor
            pipe.set(broker.key(key), value, ex=ttl)
        pipe.execute()
