"""Answer counters per model, served at GET /stats so tests and benchmarks can see faults."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

# Events that are not HTTP statuses but still worth counting; always listed, even at zero.
GARBAGE = "garbage"
TIMEOUT = "timeout"


# Seconds of 200s counted per model, from its first one.
SECONDS_COUNTED = 600
# Arrivals at a rate-limited model kept for GET /stats/arrivals, all models together: a
# benchmark's minute of a 1,200 rpm model is well within it, a runaway client is not.
ARRIVALS_KEPT = 100_000


class AnswerStats:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._started = clock()
        self._per_model: dict[str, Counter[str]] = {}
        self._total = 0
        # Requests being answered right now, and the most at once since the last reset.
        self._in_flight: Counter[str] = Counter()
        self._max_in_flight: Counter[str] = Counter()
        self._all_in_flight = 0
        self._max_all_in_flight = 0
        # Per model, when its first and its latest 200 were answered (uptime seconds): the
        # span over which the provider was kept busy, for rate-limit benchmarks.
        self._answered: dict[str, list[float]] = {}
        # Per model, how many 200s each second of its first SECONDS_COUNTED since its first
        # one: where a limiter's start lost quota (bench/ratelimit).
        self._per_second: dict[str, list[int]] = {}
        # When the first request arrived (uptime seconds): a client's start, before latency.
        self._first_request: float | None = None
        # Per rate-limited model, each request's arrival at the limiter: [uptime seconds,
        # admitted (1) or refused (0), the client's port]. Where a limiter's pace fell
        # short, this tells a stall (a gap in arrivals) from a cool-down (a gap after a
        # refusal), and which client connection went quiet.
        self._arrivals: dict[str, list[tuple[float, int, int]]] = {}

    def enter(self, model: str) -> None:
        if self._first_request is None:
            self._first_request = self._clock() - self._started
        self._in_flight[model] += 1
        self._max_in_flight[model] = max(self._max_in_flight[model], self._in_flight[model])
        self._all_in_flight += 1
        self._max_all_in_flight = max(self._max_all_in_flight, self._all_in_flight)

    def leave(self, model: str) -> None:
        self._in_flight[model] -= 1
        self._all_in_flight -= 1

    def _counter(self, model: str) -> Counter[str]:
        return self._per_model.setdefault(model, Counter({GARBAGE: 0, TIMEOUT: 0}))

    def record_status(self, model: str, status: int) -> None:
        """Count one answer sent for `model` with this HTTP status."""
        self._counter(model)[str(status)] += 1
        self._total += 1
        if status == 200:
            now = self._clock() - self._started
            span = self._answered.setdefault(model, [now, now])
            span[1] = now
            second = int(now - span[0])
            if second < SECONDS_COUNTED:
                counts = self._per_second.setdefault(model, [])
                counts.extend([0] * (second + 1 - len(counts)))
                counts[second] += 1

    def record_arrival(self, model: str, admitted: bool, port: int) -> None:
        """A request for a rate-limited model reached the limiter."""
        if sum(map(len, self._arrivals.values())) < ARRIVALS_KEPT:
            now = round(self._clock() - self._started, 4)
            self._arrivals.setdefault(model, []).append((now, int(admitted), port))

    def arrivals(self) -> dict[str, list[tuple[float, int, int]]]:
        return {model: list(seen) for model, seen in sorted(self._arrivals.items())}

    def record_event(self, model: str, event: str) -> None:
        """Count a fault (garbage or timeout) on top of the answer's status."""
        self._counter(model)[event] += 1

    def reset(self) -> None:
        self._per_model.clear()
        self._answered.clear()
        self._per_second.clear()
        self._first_request = None
        self._arrivals.clear()
        self._total = 0
        self._max_in_flight = Counter(self._in_flight)
        self._max_all_in_flight = self._all_in_flight

    def snapshot(self) -> dict[str, Any]:
        return {
            "models": {model: dict(counts) for model, counts in sorted(self._per_model.items())},
            "total": self._total,
            "in_flight": self._all_in_flight,
            "max_in_flight": self._max_all_in_flight,
            "max_in_flight_per_model": dict(sorted(self._max_in_flight.items())),
            "uptime_s": round(self._clock() - self._started, 3),
            "first_request_s": (
                None if self._first_request is None else round(self._first_request, 3)
            ),
            "answered_per_s": {
                model: list(counts) for model, counts in sorted(self._per_second.items())
            },
            "answered_s": {
                model: [round(first, 3), round(last, 3)]
                for model, (first, last) in sorted(self._answered.items())
            },
        }
