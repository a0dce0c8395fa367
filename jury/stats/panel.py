"""Combining the judges' scores of one cell into the panel's: the one registry of
cross-judge methods, used by the worker for `final_score` and when records are read for the
side-by-side `aggregations` (uqlm's avg, max, min and median columns). Stdlib only."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence

from jury.stats.robust import trimmed_mean, weighted_median_point

# method(scores, weights), scores and weights in the same (judge) order.
PanelMethod = Callable[[Sequence[float], Sequence[float]], float]


def _weighted_mean(values: Sequence[float], weights: Sequence[float]) -> float:
    return sum(s * w for s, w in zip(values, weights, strict=True)) / sum(weights)


ACROSS_MODELS: dict[str, PanelMethod] = {
    "mean": lambda values, _: statistics.fmean(values),
    "median": lambda values, _: statistics.median(values),
    "min": lambda values, _: min(values),
    "max": lambda values, _: max(values),
    "weighted_mean": _weighted_mean,
    # A majority vote decides pass/fail elsewhere; its score, for reading, is the weighted
    # mean, so that a judge's weight counts the same in the score and the vote.
    "majority_vote": _weighted_mean,
    # Robust choices: one judge failing in a biased way cannot carry the score far.
    "trimmed_mean": lambda values, _: trimmed_mean(values),
    "geometric_median": weighted_median_point,
}


def across_models(
    scores: Mapping[str, float], weights: Mapping[str, float], method: str = "mean"
) -> float | None:
    """Combine per-judge scores (judges without a score already left out); a judge's weight
    defaults to 1. None when no judge scored."""
    if not scores:
        return None
    values = list(scores.values())
    return ACROSS_MODELS[method](values, [weights.get(j, 1.0) for j in scores])


def side_by_side(
    scores: Mapping[str, float], weights: Mapping[str, float], methods: Sequence[str]
) -> dict[str, float | None]:
    """The panel's score by each of `methods`, in their order."""
    return {method: across_models(scores, weights, method) for method in methods}
