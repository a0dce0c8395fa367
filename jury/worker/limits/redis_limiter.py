"""The cluster-wide rate limiter in Redis: atomic Lua scripts on Redis' clock.

The algorithm is jury.worker.limits.ratelimit's (GCRA with reservations, a shared cool-down, a
cluster-wide pace), with a model's keys under one hash tag so they live on one Redis Cluster
slot. A model with `max_in_flight` keeps a waiting line: a task that finds every slot taken
parks its message there (jury.broker.parking), and the call that frees a slot moves the first
waiter back to its queue in the same script, so waiting for a slow local server costs no
polling. `release_waiters` is the safety net for a line whose slot-holder died.

The send gate records a send at Redis' clock when it lets it pass (`send_gate`); the request
leaves later (`sent`): once the worker has read the gate's answer, and once its event loop
has run what was ready before the request's write. A send that left late, spaced from its
recorded time, puts the send a second's quota after it into a provider window that is full.
So `sent` compares the recorded time with the worker's clock, and a send that left later
than the worker's quickest by more than LATE_SEND_S is moved, in the record, to when it
left (a clock step between two hosts moves a record by a round trip at most: no record
moves past Redis' present; and the quickest forgets it within 2 × QUICKEST_LAG_SPAN sends).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import redis

from jury.broker import keys as redis_keys
from jury.broker.scripts import lua
from jury.worker.limits.ratelimit import (
    IN_FLIGHT_POLL_S,
    LATE_SEND_S,
    LEASE_MS,
    MIN_PACE,
    SEND_SPACING,
    Limits,
    Outcome,
    Permit,
    pace_step,
    sends_per_window,
)

# Keys expire when a model goes quiet, so Redis holds state only for models in use.
STATE_TTL_MS = 600_000
# The quickest lag from a send's record to its leaving is the least of the last this many
# to twice as many sends': a step of either host's clock is forgotten after that many.
QUICKEST_LAG_SPAN = 500


class RecentMinimum:
    """The least value observed among the last `span` to 2 × `span` (two buckets in turn).
    Shared by a worker's threads unlocked: a lost update only delays it by one value."""

    def __init__(self, span: int) -> None:
        self.span = span
        self._earlier = self._current = float("inf")
        self._seen = 0

    def observe(self, value: float) -> float:
        """Take `value` in; returns the least recent value, `value` included."""
        self._seen += 1
        if self._seen > self.span:
            self._earlier, self._current, self._seen = self._current, float("inf"), 1
        self._current = min(self._current, value)
        return min(self._earlier, self._current)


class RedisRateLimiter:
    def __init__(
        self,
        client: redis.Redis,
        horizon_s: float,
        prefix: str = redis_keys.RATE_LIMIT_PREFIX,
        margin: float = 0.0,
        lines_key: str = redis_keys.WAITING_LINES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.clock = clock  # this worker's wall clock, against the send gate's records
        self._quickest_lag = RecentMinimum(QUICKEST_LAG_SPAN)
        # Per model, the send this process last let through, until it leaves (`sent`). One
        # event loop passes a model's gate one call at a time (gating.gate_turn); loops in
        # other threads may take each other's record: a lateness then reads shorter.
        self._passed: dict[str, int] = {}
        self.horizon_ms = horizon_s * 1000
        self.margin = margin
        self.prefix = prefix
        self.lines_key = lines_key
        self._reserve = client.register_script(lua("rate_reserve"))
        self._finish = client.register_script(lua("rate_finish"))
        self._release = client.register_script(lua("rate_release_waiters"))
        self._cool = client.register_script(lua("rate_cool_down"))
        self._slow = client.register_script(lua("rate_slow_down"))
        self._gate = client.register_script(lua("rate_send_gate"))
        self._late_send = client.register_script(lua("rate_late_send"))

    def _keys(self, key: str) -> redis_keys.ModelKeys:
        return redis_keys.model_keys(self.prefix, key)

    def reserve(self, key: str, limits: Limits, tokens: int, token: str) -> Permit:
        keys = self._keys(key)
        outcome, wait_ms = self._reserve(
            keys=[keys.rpm, keys.tpm, keys.cool, keys.inflight, keys.defer, keys.pace, keys.cap],
            args=[
                limits.rpm or 0,
                limits.tpm or 0,
                limits.max_in_flight or 0,
                tokens,
                self.horizon_ms,
                token,
                STATE_TTL_MS,
                LEASE_MS,
                self.margin,
                pace_step(limits),
            ],
        )
        if outcome == Outcome.BUSY:
            # The line joins the set of lines when a task waits in it (Parking.wait_in_line).
            return Permit(Outcome.BUSY, IN_FLIGHT_POLL_S, token, line=keys.waiters)
        return Permit(Outcome(int(outcome)), max(0.0, float(wait_ms) / 1000), token)

    def finish(self, key: str, limits: Limits, token: str, extra_tokens: int) -> None:
        if not (limits.max_in_flight or (limits.tpm and extra_tokens)):
            return  # no slot held, nothing to charge: spare the round trip
        keys = self._keys(key)
        self._finish(
            keys=[keys.tpm, keys.inflight, keys.waiters],
            args=[token, limits.tpm or 0, extra_tokens, STATE_TTL_MS],
        )

    def cool_down(self, key: str, seconds: float) -> None:
        self._cool(keys=[self._keys(key).cool], args=[max(1, int(seconds * 1000))])

    def send_gate(self, key: str, limits: Limits) -> float:
        if not limits.rpm:
            return 0.0
        keys = self._keys(key)
        interval_ms = 60000 / limits.rpm * (1 + self.margin)
        stretch = sends_per_window(limits.rpm)
        wait_ms, sent_at_ms = self._gate(
            keys=[keys.sends, keys.pace], args=[interval_ms, STATE_TTL_MS, stretch, SEND_SPACING]
        )
        if wait_ms > 0:
            return float(wait_ms) / 1000
        self._passed[key] = int(sent_at_ms)
        return 0.0

    def sent(self, key: str) -> None:
        recorded_ms = self._passed.pop(key, None)
        if recorded_ms is None:
            return
        # From the send's record to its leaving, on two clocks (Redis' and this worker's,
        # perhaps on two hosts): what exceeds the quickest such lag is the send's lateness.
        lag = self.clock() - recorded_ms / 1000
        if (late := lag - self._quickest_lag.observe(lag)) > LATE_SEND_S:
            # Run as an event loop's callback: a Redis error here would only be logged with
            # a traceback. The correction lost, the next send is spaced as before.
            with contextlib.suppress(redis.RedisError):
                self._late_send(
                    keys=[self._keys(key).sends], args=[recorded_ms, round(late * 1000)]
                )

    def slow_down(self, key: str, factor: float) -> None:
        self._slow(keys=[self._keys(key).pace], args=[factor, MIN_PACE, STATE_TTL_MS])

    def release_waiters(self) -> int:
        """Move waiters of every line whose model has free slots back to their queues."""
        moved = 0
        for raw in self.client.smembers(self.lines_key):
            line = raw.decode() if isinstance(raw, bytes) else str(raw)
            model = redis_keys.model_keys_of_line(line)
            count = int(self._release(keys=[line, model.inflight, model.cap]))
            moved += count
            if count == 0:
                self._forget_if_empty(line)
        return moved

    def _forget_if_empty(self, line: str) -> None:
        """Take an empty line out of the set, unless a waiter joins it meanwhile (WATCH): a
        line left out of the set would be seen by neither this safety net nor the lost-task
        watch."""
        with self.client.pipeline() as pipe:
            try:
                pipe.watch(line)
                if pipe.exists(line):
                    return
                pipe.multi()
                pipe.srem(self.lines_key, line)
                pipe.execute()
            except redis.WatchError:
                pass  # a waiter joined: the line stays
