"""Riding out an outage while following a batch: `jury submit --wait`, `jury status --watch`
and the Python API's `wait()` keep following through a database or Redis that is away for a
while (a restart, a failover, a network cut).

The batch does not need its follower: the workers go on judging, and what they store is
there when the store answers again. So a read that meets an outage (jury.broker.redis_client.
outage: a connection refused, reset or timed out, a database that is locked) is not an error:
the follower says so in one line, `database unreachable since 14:03:07, retrying`, keeps the
last figures it read, and reads again at its next poll. Anything else is still an error. An
outage longer than FOLLOW_OUTAGE_LIMIT_S (ten minutes) ends following with one paragraph
(FollowingLost): the batch goes on, and `jury status <id> --watch` follows it again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from jury.broker.redis_client import outage
from jury.errors import JuryError

T = TypeVar("T")

FOLLOW_OUTAGE_LIMIT_S = 600.0
# How often a read that must succeed (the first look, the outcome at the end) is tried again.
RETRY_S = 1.0


class FollowingLost(JuryError):
    """The store was unreachable for longer than a follower waits: following stops; the batch
    goes on."""


class Outage:
    """Reads that may meet an outage: since when the current one lasts, and the one line that
    says so; FollowingLost once it lasts past `limit_s`."""

    def __init__(
        self,
        batch_id: str,
        limit_s: float = FOLLOW_OUTAGE_LIMIT_S,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now().astimezone(),
    ) -> None:
        self.batch_id, self.limit_s, self.clock, self.wall = batch_id, limit_s, clock, wall
        self.began: float | None = None
        self.line: str | None = None  # while an outage lasts: what the follower shows
        self.cause = ""

    def attempt(self, read: Callable[[], T]) -> T | None:
        """What `read` returns (never None), or None during an outage."""
        try:
            value = read()
        except Exception as exc:
            cause = outage(exc)
            if cause is None:
                raise
            self._meet(cause)
            return None
        self.began = self.line = None
        return value

    def _meet(self, cause: str) -> None:
        now = self.clock()
        if self.began is None:
            what = cause.partition(" unreachable")[0]  # "database" or "Redis"
            self.began, self.cause = now, cause
            self.line = f"{what} unreachable since {self.wall():%H:%M:%S}, retrying"
        elif now - self.began > self.limit_s:
            raise FollowingLost(
                f"stopped following batch {self.batch_id}: {self.cause} for more than "
                f"{self.limit_s:g} s. The batch goes on (the workers keep judging it and store "
                f"what they judge once the store answers); follow it again with `jury status "
                f"{self.batch_id} --watch`."
            )


def ride_out(
    read: Callable[[], T],
    outages: Outage,
    say: Callable[[str], None],
    pause: Callable[[], None] = lambda: time.sleep(RETRY_S),
) -> T:
    """`read`'s value, read again through an outage (said once, in one line) until it
    answers; FollowingLost past the outage limit."""
    said = False
    while (value := outages.attempt(read)) is None:
        if not said and outages.line:
            say(outages.line)
            said = True
        pause()
    return value
