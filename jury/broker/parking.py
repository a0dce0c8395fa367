"""Parking: a task that must wait holds nothing while it waits.

A judge task whose first rate-limit slot lies beyond the horizon, or whose model has every
in-flight slot taken, is not kept running: its message is written again (with what it has
done so far, e.g. how long it has waited) and parked in Redis, and the running delivery is
acknowledged. Two places to park:

- the parked set (jury.broker.keys.PARKED, a sorted set, score = when it is due, by Redis'
  clock): waits of a known length (a rate-limit slot, a 429's cool-down, a store that refused
  samples). Every worker's engine moves due messages back to their queues (`release_due`,
  atomic in Lua; a message is moved once whoever gets there first). The script answers when
  the next parked message is due, and a park in this process says when its message is due
  (`PARKED_HERE`): the worker's housekeeper sleeps until then instead of polling.
- a model's waiting line (`…:waiters`, a list): waits for an in-flight slot, of no known
  length. The call that frees a slot hands it to the first waiter (jury.worker.limits.ratelimit's
  finish script moves one waiter to its queue); the sweeper releases waiters of a model whose
  slots are free, should the worker that held them have died.

Members are "<queue key>\\n<message>": the queue key is already under the broker's prefix.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from redis.client import Pipeline

from jury.broker import keys as redis_keys
from jury.broker.redis_client import BrokerRedis
from jury.broker.scripts import lua

# Moved per round trip: enough for thousands of tasks a second, small enough to stay quick.
RELEASE_BATCH = 500
# A release moves the messages due within this long too. A rate-limited judge's tasks are
# parked a slot apart (producer.pacing), and half a horizon before their slot: released one
# by one, each was delivered, prepared and stored alone, and a throttled judgment cost
# several times an unthrottled one's CPU (bench/ratelimit); released early and together,
# they share their deliveries and their prepare and store groups, then wait for their
# reserved slots on the worker's event loop. Half a second's worth at a time still cost a
# throttled judgment three times an unthrottled one's CPU; two seconds' are fewer, larger
# waves. Never more than a third of the rate horizon (release_ahead_s): a task parked half
# a horizon before its slot comes back with its slot inside the horizon, granted, not
# parked again.
RELEASE_AHEAD_S = 2.0


def release_ahead_s(horizon_s: float) -> float:
    """How far ahead a release reaches, for a cluster whose rate horizon is `horizon_s`."""
    return min(RELEASE_AHEAD_S, horizon_s / 3)


class DueSignal:
    """The earliest time (time.monotonic) something parked by this process falls due, since
    its housekeeper last looked: a park wakes the housekeeper if it sleeps past that."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._due = math.inf

    def note(self, due: float) -> None:
        with self._changed:
            if due < self._due:
                self._due = due
                self._changed.notify_all()

    def wake(self) -> None:
        """Wake the waiter now (a housekeeper stopping)."""
        self.note(-math.inf)

    def wait_until(self, deadline: float) -> None:
        """Sleep until `deadline` (time.monotonic) or until a noted due time, whichever is
        first; then forget the noted time (the parked set's own answer covers it)."""
        with self._changed:
            while (left := min(deadline, self._due) - time.monotonic()) > 0:
                self._changed.wait(left)
            self._due = math.inf


# One per process: parks made here wake this process's housekeeper (a worker's, if any).
PARKED_HERE = DueSignal()


@dataclass(frozen=True)
class Released:
    """What one release pass did and saw."""

    moved: int
    # Seconds until the next parked message (anyone's) is due; None: nothing is parked.
    next_due_s: float | None
    # How many models' waiting lines exist (jury.worker.limits.redis_limiter releases them).
    lines: int


class Parking:
    def __init__(self, broker: BrokerRedis) -> None:
        self.broker = broker
        self.key = broker.key(redis_keys.PARKED)
        self._park = broker.client.register_script(lua("park"))
        self._release = broker.client.register_script(lua("release_parked"))
        self._waits_in_line = broker.client.register_script(lua("waits_in_line"))
        self.lines_key = broker.key(redis_keys.WAITING_LINES)

    def park(self, queue: str, message: str, delay_s: float) -> None:
        """Park `message` for `queue` (a plain queue name) for `delay_s`."""
        self.park_all([(queue, message, delay_s)])

    def park_all(
        self, entries: Sequence[tuple[str, str, float]], pipe: Pipeline | None = None
    ) -> None:
        """Park each (queue, message, delay_s), in one round trip, or in `pipe` (a transaction
        of the caller's: a producer's wave)."""
        args: list[str | int] = []
        for queue, message, delay_s in entries:
            args += [max(0, int(delay_s * 1000)), f"{self.broker.key(queue)}\n{message}"]
        self._park(keys=[self.key], args=args, client=pipe)
        if entries:
            PARKED_HERE.note(time.monotonic() + min(delay for _q, _m, delay in entries))

    def wait_in_line(self, waiters_key: str, queue: str, message: str) -> None:
        """Put `message` in a model's waiting line (a key from the rate limiter), and the line
        in the set of lines, in one transaction: the sweeper's safety net and the lost-task
        watch find waiters through that set."""
        with self.broker.client.pipeline(transaction=True) as pipe:
            pipe.sadd(self.lines_key, waiters_key)
            pipe.rpush(waiters_key, f"{self.broker.key(queue)}\n{message}")
            pipe.execute()

    def release_due(self) -> int:
        """Move every parked message that is due back to its queue; returns how many."""
        return self.release().moved

    def release(self, ahead_s: float = 0.0) -> Released:
        """Move every parked message that is due (or due within `ahead_s`) back to its queue,
        and say when the next one is due and whether any model has a waiting line: one round
        trip when little is due."""
        moved = 0
        while True:
            count, next_in_ms, lines = self._release(
                keys=[self.key, self.lines_key], args=[RELEASE_BATCH, int(ahead_s * 1000)]
            )
            moved += int(count)
            if int(count) < RELEASE_BATCH:
                next_due = None if int(next_in_ms) < 0 else int(next_in_ms) / 1000
                return Released(moved, next_due, int(lines))

    def parked(self) -> int:
        return int(self.broker.client.zcard(self.key))

    def holds_any(self, queues: Sequence[str]) -> bool:
        """Whether a message for one of `queues` (plain queue names) is parked, or waits in
        a model's line for an in-flight slot."""
        if next(self._members_for(queues), None) is not None:
            return True
        return self._any_in_line(queues)

    def count_for(self, queues: Sequence[str]) -> int:
        """How many messages for `queues` (plain queue names) are parked, plus how many wait
        in the models' lines, whoever's: a line is a model's, and may hold another
        deployment's tasks too. Read by the producer's back-pressure at every wave and poll,
        so counted by LLEN (a scan of a 50,000-message line held Redis for ~95 ms)."""
        lines = self.broker.client.smembers(self.lines_key)
        waiting = sum(int(self.broker.client.llen(line)) for line in lines)
        return sum(1 for _ in self._members_for(queues)) + waiting

    def drop_batch(self, queues: Sequence[str], batch_id: str) -> int:
        """Remove the parked tasks of `batch_id` (a cancelled batch) for `queues`; returns how
        many. A task's first argument is its batch (jury.broker.wire's messages)."""
        dropped = [m for m in self._members_for(queues, batch_id) if _batch_of(m) == batch_id]
        for start in range(0, len(dropped), RELEASE_BATCH):
            self.broker.client.zrem(self.key, *dropped[start : start + RELEASE_BATCH])
        return len(dropped)

    def _members_for(self, queues: Sequence[str], containing: str = "") -> Iterator[str]:
        """The parked members for `queues` (and with `containing` in them, if given). The set
        is shared by every deployment under the prefix; this scans it (a round trip per
        thousand members), so it is for a producer's wave, a cancel or the sweeper's rare
        checks, not for every task."""
        keys = {self.broker.key(queue) for queue in queues}
        common = min(keys, default="")
        for key in keys:
            while not key.startswith(common):
                common = common[:-1]
        pattern = redis_keys.glob_escape(common) + "*"
        if containing:
            pattern += redis_keys.glob_escape(containing) + "*"
        for member, _score in self.broker.client.zscan_iter(self.key, match=pattern, count=1000):
            text = member.decode() if isinstance(member, bytes) else str(member)
            if text.partition("\n")[0] in keys:
                yield text

    def _any_in_line(self, queues: Sequence[str]) -> bool:
        """Whether a member of a model's waiting line is for one of `queues`, looked for in
        Redis a line at a time (one round trip per line; a line is one model's). A line
        waits on a slot-holder's call, of no known length, and one whose holder died, on its
        lease (jury.worker.limits.ratelimit.LEASE_MS). A scan: for the sweeper's rare checks, not
        for every wave."""
        keys = [self.broker.key(queue) for queue in queues]
        for raw in self.broker.client.smembers(self.lines_key):
            line = raw.decode() if isinstance(raw, bytes) else str(raw)
            if int(self._waits_in_line(keys=[line], args=keys)):
                return True
        return False


def _batch_of(member: str) -> str | None:
    """The batch a parked member's task belongs to: its message body's first argument."""
    try:
        body = json.loads(json.loads(member.partition("\n")[2])["body"])
        return str(body[0][0])
    except (ValueError, KeyError, IndexError, TypeError):
        return None
