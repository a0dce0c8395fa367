"""A batch's live tasks: queued, held by a worker (kombu's `unacked`), parked, or waiting in a
model's line for an in-flight slot. Whatever these tasks judge is paid for once they run, so
`jury resume` must not queue the same samples again (jury.producer.control).

A scan of the deployment's queues, its `unacked` hash, the parked set and the waiting lines,
matching the batch id server-side where Redis can (the parked set's ZSCAN) and a thousand
members at a time where it cannot: for a rare command (resume), never for every task.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from jury.broker import keys as redis_keys
from jury.broker.redis_client import BrokerRedis, as_text
from jury.schemas.tasks import GENERATE_TASK, JUDGE_TASK, GenerationRef, SampleRef

CHUNK = 1000


@dataclass
class LiveTasks:
    """How many of a batch's tasks are in each place, and the samples its judge tasks hold."""

    queued: int = 0
    held: int = 0
    parked: int = 0
    waiting: int = 0
    samples: set[SampleRef] = field(default_factory=set)
    generations: set[GenerationRef] = field(default_factory=set)

    def merge(self, other: LiveTasks) -> None:
        """Take in a later scan's findings (counts: the larger of the two)."""
        self.queued = max(self.queued, other.queued)
        self.held = max(self.held, other.held)
        self.parked = max(self.parked, other.parked)
        self.waiting = max(self.waiting, other.waiting)
        self.samples |= other.samples
        self.generations |= other.generations

    @property
    def total(self) -> int:
        return self.queued + self.held + self.parked + self.waiting

    def describe(self) -> str:
        places = [
            (self.queued, "queued"),
            (self.held, "held by a worker"),
            (self.parked, "parked"),
            (self.waiting, "waiting for a slot"),
        ]
        return ", ".join(f"{n} {where}" for n, where in places if n)


def live_tasks(broker: BrokerRedis, queues: Sequence[str], batch_id: str) -> LiveTasks:
    """The live tasks of `batch_id` in this deployment (its `queues`, plain names)."""
    found = LiveTasks()
    needle = batch_id  # (quoted, then escaped inside the envelope: matched bare, checked after)
    queue_keys = {broker.key(q) for q in queues}
    client = broker.client
    for key in queue_keys:
        for message in _list_members(broker, key, needle):
            found.queued += _count(found, batch_id, message)
    # HSCAN's MATCH looks at the fields (delivery tags), not at the messages: read them all.
    for _tag, raw in client.hscan_iter(broker.unacked_key, count=CHUNK):
        if needle not in as_text(raw):
            continue
        entry = _json(raw)
        if isinstance(entry, list) and entry and isinstance(entry[0], dict):
            routing = entry[2] if len(entry) > 2 else ""
            if broker.key(str(routing)) in queue_keys:
                found.held += _count(found, batch_id, entry[0])
    parked_key = broker.key(redis_keys.PARKED)
    # ZSCAN's MATCH looks at the members: the messages.
    pattern = f"*{redis_keys.glob_escape(batch_id)}*"
    for member, _due in client.zscan_iter(parked_key, match=pattern, count=CHUNK):
        found.parked += _count_member(found, batch_id, member, queue_keys)
    for line in client.smembers(broker.key(redis_keys.WAITING_LINES)):
        for member in _list_members(broker, as_text(line), needle):
            found.waiting += _count_member(found, batch_id, member, queue_keys)
    return found


def _list_members(broker: BrokerRedis, key: str, needle: str) -> Iterator[str | bytes]:
    start = 0
    while True:
        chunk = broker.client.lrange(key, start, start + CHUNK - 1)
        for member in chunk:
            if needle in as_text(member):
                yield member
        if len(chunk) < CHUNK:
            return
        start += CHUNK


def _count_member(
    found: LiveTasks, batch_id: str, member: str | bytes, queue_keys: Iterable[str]
) -> int:
    """A parked or waiting member: "<queue key>\\n<message>", counted if for our queues."""
    queue, _, message = as_text(member).partition("\n")
    return _count(found, batch_id, message) if queue in queue_keys else 0


def _count(found: LiveTasks, batch_id: str, message: Any) -> int:
    """1 if `message` (a kombu message, as JSON or decoded) is a task of `batch_id`; what a
    judge or generation task will produce is noted."""
    envelope = _json(message) if not isinstance(message, dict) else message
    if not isinstance(envelope, dict):
        return 0
    body = _json(envelope.get("body"))
    args = body[0] if isinstance(body, list) and body and isinstance(body[0], list) else []
    if not args or args[0] != batch_id:
        return 0
    headers = envelope.get("headers")
    task = headers.get("task") if isinstance(headers, dict) else None
    try:
        if task == JUDGE_TASK and len(args) >= 5:
            batch, item, dimension, judge = (str(a) for a in args[:4])
            found.samples.add(SampleRef(batch, item, dimension, judge, int(args[4])))
        elif task == GENERATE_TASK and len(args) >= 3:
            batch, item, candidate = (str(a) for a in args[:3])
            found.generations.add(GenerationRef(batch, item, candidate))
    except (TypeError, ValueError):
        pass
    return 1


def _json(raw: Any) -> Any:
    try:
        return json.loads(as_text(raw))
    except (TypeError, ValueError):
        return None
