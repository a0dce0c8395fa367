"""Per-model sliding-window request limits, as a provider's requests-per-minute quota."""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

WINDOW_SECONDS = 60.0


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after_s: int = 0  # Whole seconds until a slot frees up; >= 1 when refused.
    remaining: int = 0
    reset_s: float = 0.0  # Until the oldest admission leaves the window.


class SlidingWindowLimiter:
    """Counts accepted requests per model over the last 60 seconds.

    Only requests that got past the limiter enter the window, so a client hammering a
    limited model is not locked out forever. `check` never awaits, which makes it exact
    under asyncio concurrency: no two requests can both take the last slot.
    """

    def __init__(
        self,
        window_s: float = WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._window_s = window_s
        self._clock = clock
        self._accepted: dict[str, deque[float]] = {}

    def check(self, model: str, limit: int) -> Decision:
        """Admit one request for `model` if fewer than `limit` were admitted in the window.

        A limit of 0 means unlimited (and such requests are not tracked).
        """
        if limit <= 0:
            return Decision(allowed=True)
        now = self._clock()
        accepted = self._accepted.setdefault(model, deque())
        while accepted and accepted[0] <= now - self._window_s:
            accepted.popleft()
        if len(accepted) < limit:
            accepted.append(now)
            reset = accepted[0] + self._window_s - now
            return Decision(allowed=True, remaining=limit - len(accepted), reset_s=reset)
        # The oldest admission leaves the window first; that is when the next slot opens.
        wait_s = accepted[0] + self._window_s - now
        return Decision(allowed=False, retry_after_s=max(1, math.ceil(wait_s)), reset_s=wait_s)


def openai_duration(seconds: float) -> str:
    """A duration as OpenAI's x-ratelimit-reset-* headers write it: 12ms, 1s, 6m0s."""
    if seconds < 1:
        return f"{max(0, round(seconds * 1000))}ms"
    whole = round(seconds)
    minutes, rest = divmod(whole, 60)
    return f"{minutes}m{rest}s" if minutes else f"{rest}s"


def rate_headers(rpm: int, decision: Decision, window_s: float) -> dict[str, str]:
    """The request headers OpenAI sends with every answer of a limited model: its quota per
    minute, what is left of it (the window's remainder, scaled to a minute) and when it
    resets."""
    return {
        "x-ratelimit-limit-requests": str(rpm),
        "x-ratelimit-remaining-requests": str(round(decision.remaining * 60 / window_s)),
        "x-ratelimit-reset-requests": openai_duration(decision.reset_s),
    }
