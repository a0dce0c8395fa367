"""A pairwise cell's verdict: each side's score, the winner that follows from them, and the
LLM-judge evaluator's figures (each side's spread, the majority winner and its agreement).
Pure functions over the cell's samples and pair judgments; no Celery, no I/O.

Everything shown comes from one computation. A judgment's score of a side is its mean over
the orders shown; a judge's score of a side is the batch's `within_model` of its judgments';
the panel's is its `across_models` of the judges' (jury.stats.panel.across_sides). The
panel's preference for A, `final_score`, is score_a − score_b of those very scores and the
winner follows from it and the tie tolerance, so for every method the winner never
contradicts the scores shown, and swapping the sides mirrors the verdict exactly (A's and B's
scores trade places, the preference changes sign, A wins becomes B wins). A judge's own
aggregated score is likewise its A − B.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import NamedTuple

from jury.schemas.batch import Aggregation, Dimension, Judge
from jury.schemas.pairwise import PairJudgment, PairwiseOutcome, Winner, winner_of
from jury.schemas.results import SampleResult, Verdict
from jury.stats.panel import SideScores, across_sides
from jury.worker.judging.aggregation import (
    cell_record,
    consensus_metrics,
    evaluate_judges,
    unique_samples,
    unscored_verdict,
)

# The order winners are listed in when several share the top count (a fixed order, so that
# swapping the sides lists the mirrored winners in the mirrored order).
_WINNER_ORDER: dict[str, int] = {"A": 0, "B": 1, "tie": 2}


def share_pct(part: int, whole: int) -> float | None:
    """part of whole in percent, two decimals; None of nothing."""
    return round(100.0 * part / whole, 2) if whole else None


def side_pair(judgment: PairJudgment) -> SideScores:
    """A judgment's score of A and of B, each the mean over the orders shown."""
    return statistics.fmean(judgment.scores_a), statistics.fmean(judgment.scores_b)


def judge_sides(pairs: Sequence[SideScores], within_model: str) -> SideScores:
    """One judge's score of each side: `within_model` (mean or median) of its judgments'."""
    center = statistics.median if within_model == "median" else statistics.fmean
    return center([p[0] for p in pairs]), center([p[1] for p in pairs])


def side_spread(pairs: Sequence[SideScores]) -> tuple[float | None, float | None]:
    """The sample std (ddof=1) of each side's per-judgment score; 0 for one judgment."""
    spreads: list[float | None] = []
    for side in (0, 1):
        values = [pair[side] for pair in pairs]
        spreads.append(None if not values else statistics.stdev(values) if len(values) > 1 else 0.0)
    return spreads[0], spreads[1]


class Majority(NamedTuple):
    """The judgments' most frequent winner, as the LLM-judge evaluator reports it."""

    winner: Winner | None  # None: no judgment; `tie` when several winners share the top
    n_named: int  # how many judgments named it (each of the tied ones, when tied)
    tied_between: list[Winner] | None = None  # the winners sharing the top count, if several


def majority(winners: Iterable[Winner]) -> Majority:
    """The most frequent of the judgments' winners and how many named it. When several are
    named equally often (two runs for A, two for B, one tie) no side has the majority: it is
    reported as a tie between them, `tied_between: [A, B]`, and its count is the top count,
    so that the agreement is the share of runs that named the most frequent winner, as the
    evaluator defines it (40 % there, not the 20 % that said tie)."""
    counts = Counter(winners)
    if not counts:
        return Majority(None, 0)
    top = max(counts.values())
    leaders = sorted((w for w, n in counts.items() if n == top), key=_WINNER_ORDER.__getitem__)
    if len(leaders) > 1:
        return Majority("tie", top, leaders)
    return Majority(leaders[0], top)


def pairwise_outcome(
    preference: float | None,
    judgments: Iterable[PairJudgment],
    tie_tolerance: float,
    *,
    sides: SideScores | None = None,
    by_judge: Mapping[str, SideScores] | None = None,
    names: tuple[str, str] | None = None,
) -> PairwiseOutcome:
    """The outcome of one (item, dimension) from its panel preference and its judgments.
    `sides`: A's and B's panel score, the preference being their difference; without it,
    their means over every judgment. `by_judge`: each judge's (A, B) scores."""
    kept = list(judgments)
    winner = None if preference is None else winner_of(preference, tie_tolerance)
    own_winners = [winner_of(j.preference, tie_tolerance) for j in kept]
    agreeing = sum(w == winner for w in own_winners)
    both = [j for j in kept if j.both_orders]
    consistent = sum(
        len({winner_of(order, tie_tolerance) for order in j.order_preferences}) == 1 for j in both
    )
    advantages = [a for a in (j.first_position_advantage for j in both) if a is not None]
    if sides is None and kept:
        sides = (
            statistics.fmean(s for j in kept for s in j.scores_a),
            statistics.fmean(s for j in kept for s in j.scores_b),
        )
    std_a, std_b = side_spread([side_pair(j) for j in kept])
    top = majority(own_winners)
    named = {"A": names[0], "B": names[1], "tie": "tie"} if names else {}
    return PairwiseOutcome(
        winner=winner,
        preference=preference,
        score_a=sides[0] if sides else None,
        score_b=sides[1] if sides else None,
        tie_tolerance=tie_tolerance,
        n_judgments=len(kept),
        n_agreeing=agreeing,
        agreement_pct=share_pct(agreeing, len(kept)),
        n_position_consistent=consistent,
        position_consistency_pct=share_pct(consistent, len(both)),
        first_position_bias=sum(advantages) / len(advantages) if advantages else None,
        n_both_orders=len(both),
        std_a=std_a,
        std_b=std_b,
        majority_winner=top.winner,
        n_majority=top.n_named,
        majority_agreement_pct=share_pct(top.n_named, len(kept)),
        majority_tied_between=top.tied_between,
        judge_scores=dict(by_judge) if by_judge else None,
        name_a=names[0] if names else None,
        name_b=names[1] if names else None,
        winner_name=named.get(winner) if winner else None,
    )


def _preference(sides: SideScores | None) -> float | None:
    return None if sides is None else sides[0] - sides[1]


def build_pairwise_verdict(
    item_id: str,
    dimension: Dimension,
    panel: Sequence[Judge],
    samples: Sequence[SampleResult],
    judgments: Mapping[tuple[str, int], PairJudgment],
    aggregation: Aggregation,
    tie_tolerance: float,
    names: tuple[str, str] | None = None,
) -> Verdict:
    """The record of one pairwise (item, dimension) from its samples and their judgments (by
    (judge, sample)). A comparison has a winner, not a pass mark: `passed` is null."""
    judged = evaluate_judges(panel, samples, aggregation.within_model)
    kept = [
        (key[0], judgments[key])
        for key, sample in unique_samples(samples).items()
        if sample.ok and key in judgments
    ]
    pairs: dict[str, list[SideScores]] = {}
    for judge, judgment in kept:
        pairs.setdefault(judge, []).append(side_pair(judgment))
    by_judge = {
        judge: judge_sides(found, aggregation.within_model) for judge, found in pairs.items()
    }
    judged = replace(
        judged,
        evaluations={
            name: evaluation.model_copy(
                update={"aggregated_score": _preference(by_judge.get(name))}
            )
            for name, evaluation in judged.evaluations.items()
        },
    )
    weights = {j.name: j.weight for j in panel}
    sides = across_sides(by_judge, weights, aggregation.across_models)
    preference = _preference(sides)
    outcome = pairwise_outcome(
        preference,
        [judgment for _, judgment in kept],
        tie_tolerance,
        sides=sides,
        by_judge=by_judge,
        names=names,
    )
    if preference is None:
        verdict = unscored_verdict(item_id, dimension, judged)
        return verdict.model_copy(update={"pairwise": outcome})
    metrics, low_consensus = consensus_metrics(judged, preference, len(panel), aggregation)
    reasons = [*low_consensus, *judged.reasons]
    return cell_record(item_id, dimension, judged, metrics, None, reasons, pairwise=outcome)
