"""Random misbehaviour of a real provider: latency, hangs, server errors and garbage answers.

The decisions are drawn here, up front and purely from a random.Random, so the server only
carries them out and tests can check the odds without any HTTP.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from jury.simulator.config import SimulatorConfig

SERVER_ERROR_STATUSES: tuple[int, ...] = (500, 502, 503)


@dataclass(frozen=True)
class FaultPlan:
    latency_s: float = 0.0
    hang_s: float | None = None  # Stall this long before answering, so the client times out.
    error_status: int | None = None  # Answer this 5xx instead of a score.
    garbage: bool = False  # Answer 200 with text no score parser can read.


def sample_latency_s(rng: random.Random, median_ms: float, sigma: float) -> float:
    """Lognormal latency with the given median; real API latencies have this long right tail."""
    if median_ms <= 0:
        return 0.0
    return rng.lognormvariate(math.log(median_ms / 1000.0), sigma)


def plan_faults(config: SimulatorConfig, rng: random.Random) -> FaultPlan:
    """Draw the faults for one request. A hang is independent of the other two; an error
    excludes garbage (a 5xx has no body to garble)."""
    latency_s = sample_latency_s(rng, config.latency_ms, config.latency_sigma)
    hang_s = config.hang_seconds if rng.random() < config.timeout_rate else None
    if rng.random() < config.error_rate:
        return FaultPlan(latency_s, hang_s, error_status=rng.choice(SERVER_ERROR_STATUSES))
    garbage = rng.random() < config.garbage_rate
    return FaultPlan(latency_s, hang_s, garbage=garbage)
