"""Percentile bootstrap intervals over items.

Items are the units resampled (with replacement), so every statistic computed on a resample
sees whole items: a judge's score and the label of one item stay together, and two raters
compared on one resample are compared on the same items (a paired interval). The resamples
come from a seeded generator: the same data and seed give the same intervals.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

Key = TypeVar("Key")
Statistic = Callable[[Sequence[int]], float | None]

DEFAULT_RESAMPLES = 400
DEFAULT_LEVEL = 0.95


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """The `fraction` quantile by linear interpolation between order statistics (numpy's
    default), of values already sorted."""
    if not sorted_values:
        raise ValueError("no values")
    position = fraction * (len(sorted_values) - 1)
    below = math.floor(position)
    above = min(below + 1, len(sorted_values) - 1)
    weight = position - below
    return sorted_values[below] * (1 - weight) + sorted_values[above] * weight


def bootstrap_intervals(
    n_units: int,
    statistics: Mapping[Key, Statistic],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
) -> dict[Key, tuple[float, float] | None]:
    """A percentile interval for each statistic, every statistic evaluated on the same
    resamples of unit indices 0..n_units−1.

    A statistic may be undefined on some resample (None: e.g. a constant side); its interval
    uses the resamples where it is defined, and is None if that is fewer than half of them or
    there are fewer than two units.
    """
    if not 0 < level < 1:
        raise ValueError("level must lie between 0 and 1")
    values: dict[Key, list[float]] = {key: [] for key in statistics}
    if n_units >= 2 and resamples > 0:
        rng = random.Random(seed)
        for _ in range(resamples):
            units = [rng.randrange(n_units) for _ in range(n_units)]
            for key, statistic in statistics.items():
                value = statistic(units)
                if value is not None and not math.isnan(value):
                    values[key].append(value)
    tail = (1 - level) / 2
    intervals: dict[Key, tuple[float, float] | None] = {}
    for key, found in values.items():
        if len(found) * 2 < resamples or not found:
            intervals[key] = None
            continue
        found.sort()
        intervals[key] = (percentile(found, tail), percentile(found, 1 - tail))
    return intervals


MIN_RESAMPLES = 50
# Resamples × items: the work one interval may take when nobody asked for a number (the
# results summary, the report). 400 resamples up to 500 labelled items, fewer beyond.
RESAMPLE_BUDGET = 200_000


def resamples_for(n_units: int) -> int:
    """Resamples that keep a report of `n_units` items to the budget (never below 50)."""
    return max(MIN_RESAMPLES, min(DEFAULT_RESAMPLES, RESAMPLE_BUDGET // max(n_units, 1)))
