"""Combining the judges' scores of one cell into the panel's: the one registry of
cross-judge methods, used by the worker for `final_score` and when records are read for the
side-by-side `aggregations` (uqlm's avg, max, min and median columns). Stdlib only.

A pairwise cell has two scores per judge, one per side: each side is combined on its own by
the same method (`across_sides`) and the panel's preference for A is their difference, so a
record's winner always follows from the side scores it shows, for every method, and swapping
the sides mirrors it exactly."""

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


SideScores = tuple[float, float]  # a judge's (or the panel's) score of side A and of side B


def across_sides(
    sides: Mapping[str, SideScores], weights: Mapping[str, float], method: str = "mean"
) -> SideScores | None:
    """The panel's score of each side, A's from the judges' A scores and B's from their B
    scores, by the same `method`; None when no judge scored. With a linear method (means)
    A − B equals the method applied to the judges' A − B; with max, min, median or the robust
    ones it need not (each side's most optimistic judge may differ), which is why the panel's
    preference is taken as A − B of these and never as the method over preferences."""
    if not sides:
        return None
    score_a = across_models({j: s[0] for j, s in sides.items()}, weights, method)
    score_b = across_models({j: s[1] for j, s in sides.items()}, weights, method)
    assert score_a is not None and score_b is not None
    return score_a, score_b


def preference_side_by_side(
    sides: Mapping[str, SideScores], weights: Mapping[str, float], methods: Sequence[str]
) -> dict[str, float | None]:
    """A pairwise record's `aggregations`: the panel's preference for A by each of `methods`,
    each A − B of `across_sides` (so the main method's is the record's final_score)."""
    found: dict[str, float | None] = {}
    for method in methods:
        panel = across_sides(sides, weights, method)
        found[method] = None if panel is None else panel[0] - panel[1]
    return found
