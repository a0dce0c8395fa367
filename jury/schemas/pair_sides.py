"""Each side of a pairwise comparison as the LLM-judge evaluator reports it: the side's score
from the same two-stage aggregate as the winner (within each judge, then across judges, by the
batch's methods), its spread over the judgments (mean ± std), and the majority winner of the
judgments with how many named it. Pure functions over plain numbers (schemas.pairwise uses
them); a judgment is read as its (A, B) scores, each the mean over the orders shown."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence

from jury.stats.panel import across_models

SidePair = tuple[float, float]  # one judgment: A's score and B's, each over the orders shown


def _within(values: Sequence[float], method: str) -> float:
    return statistics.median(values) if method == "median" else statistics.fmean(values)


def side_scores(
    by_judge: Mapping[str, Sequence[SidePair]],
    within_model: str,
    across: str,
    weights: Mapping[str, float],
) -> tuple[float | None, float | None]:
    """A's and B's score, each aggregated as the preference is: a judge's score of a side is
    the `within_model` of its judgments', the panel's the `across` of the judges'. With means,
    score_a - score_b is the preference exactly: the winner and the scores shown agree."""
    method = "weighted_mean" if across == "majority_vote" else across
    found: list[float | None] = []
    for side in (0, 1):
        per_judge = {
            judge: _within([pair[side] for pair in pairs], within_model)
            for judge, pairs in by_judge.items()
            if pairs
        }
        found.append(across_models(per_judge, weights, method))
    return found[0], found[1]


def side_spread(pairs: Sequence[SidePair]) -> tuple[float | None, float | None]:
    """The sample std (ddof=1) of each side's per-judgment score; 0 for one judgment."""
    spreads: list[float | None] = []
    for side in (0, 1):
        values = [pair[side] for pair in pairs]
        spreads.append(None if not values else statistics.stdev(values) if len(values) > 1 else 0.0)
    return spreads[0], spreads[1]


def majority(winners: Sequence[str]) -> tuple[str | None, int]:
    """The most frequent of the judgments' winners and how many named it. When two winners
    are named equally often there is no majority: `tie`, with the judgments that said tie."""
    counts = Counter(winners)
    if not counts:
        return None, 0
    ranked = counts.most_common()
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return "tie", counts["tie"]
    return ranked[0]
