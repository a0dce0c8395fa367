"""Two-stage aggregation and consensus: pure functions, no Celery, no I/O.

Stage 1 aggregates each judge's N samples of a cell (mean or median); stage 2 aggregates the
judges that produced at least one score (mean, median, min, max, weighted mean, a majority
vote on pass/fail, or the robust trimmed mean and weighted geometric median). Spread is the
sample standard deviation (ddof=1); a single value has spread 0.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from jury.schemas.batch import Aggregation, Dimension, Judge
from jury.schemas.judge_prompts import PassVote, pass_vote
from jury.schemas.pairwise import PairwiseOutcome
from jury.schemas.results import ConsensusMetrics, JudgeEvaluation, Level, SampleResult, Verdict
from jury.stats.panel import across_models

# Below this cross-model std the judges agree: consensus HIGH (docs/results.md).
HIGH_CONSENSUS_STD = 0.5
_DOWNGRADE = {Level.HIGH: Level.MEDIUM, Level.MEDIUM: Level.LOW, Level.LOW: Level.LOW}


def sample_std(values: Sequence[float]) -> float | None:
    if not values:
        return None
    return statistics.stdev(values) if len(values) > 1 else 0.0


def aggregate_within_model(
    scores: Sequence[float], n_failed: int, method: str = "mean"
) -> JudgeEvaluation:
    if not scores:
        return JudgeEvaluation(
            samples=[], aggregated_score=None, within_model_std=None, n_failed=n_failed
        )
    center = statistics.median(scores) if method == "median" else statistics.fmean(scores)
    return JudgeEvaluation(
        samples=list(scores),
        aggregated_score=center,
        within_model_std=sample_std(scores),
        n_failed=n_failed,
    )


def aggregate_across_models(
    scores: dict[str, float], weights: dict[str, float], method: str = "mean"
) -> float | None:
    """Combine per-judge scores; judges without a score must already be left out."""
    return across_models(scores, weights, method)


@dataclass(frozen=True)
class PassFailVote:
    """The judges' pass/fail votes on one cell, each weighted by the judge's `weight`."""

    pass_weight: float
    fail_weight: float

    @property
    def tied(self) -> bool:
        return self.pass_weight == self.fail_weight

    @property
    def passed(self) -> bool:
        # A tie is not a majority: the cell fails (and is flagged) rather than pass by default.
        return self.pass_weight > self.fail_weight


def majority_vote(
    scores: dict[str, float], weights: dict[str, float], threshold: float
) -> PassFailVote:
    """Each scoring judge votes pass when its own score reaches the threshold."""
    pass_weight = sum(weights.get(j, 1.0) for j, s in scores.items() if s >= threshold)
    fail_weight = sum(weights.get(j, 1.0) for j, s in scores.items() if s < threshold)
    return PassFailVote(pass_weight=pass_weight, fail_weight=fail_weight)


def consensus_level(cross_model_std: float, threshold: float) -> Level:
    if cross_model_std < HIGH_CONSENSUS_STD:
        return Level.HIGH
    if cross_model_std <= threshold:
        return Level.PARTIAL
    return Level.LOW


def confidence_level(consensus: Level, n_scored_judges: int, degraded: bool, noisy: bool) -> Level:
    """How far to trust a final score.

    Starts from consensus (HIGH→HIGH, PARTIAL→MEDIUM, LOW→LOW) and drops one level for each
    of: a single scoring judge (nothing to cross-check), failed samples or a dropped judge, and
    judges that disagree with themselves (mean within-model std above the consensus threshold).
    """
    level: Level = Level.MEDIUM if consensus == Level.PARTIAL else consensus
    for weakness in (n_scored_judges < 2, degraded, noisy):
        if weakness:
            level = _DOWNGRADE[level]
    return level


def unique_samples(samples: Sequence[SampleResult]) -> dict[tuple[str, int], SampleResult]:
    """One sample per (judge, sample index): a duplicate delivery must not count twice.

    A successful sample wins over a failed one for the same cell.
    """
    chosen: dict[tuple[str, int], SampleResult] = {}
    for sample in samples:
        key = (sample.judge, sample.sample)
        if key not in chosen or (sample.ok and not chosen[key].ok):
            chosen[key] = sample
    return chosen


@dataclass(frozen=True)
class JudgeScores:
    """Stage 1 of a cell: each judge's evaluation of its samples, and why a judge fell short
    (a failed or missing sample, no score at all)."""

    evaluations: dict[str, JudgeEvaluation]
    reasons: list[str]

    @property
    def scored(self) -> dict[str, float]:
        """The judges that produced a score, with it."""
        return {
            name: e.aggregated_score
            for name, e in self.evaluations.items()
            if e.aggregated_score is not None
        }


def _shortfall(judge: Judge, failed: Sequence[SampleResult], missing: int, scored: bool) -> str:
    """Why a judge's evaluation rests on fewer samples than asked."""
    if not scored:
        why = failed[-1].error if failed else "no sample arrived"
        return f"judge {judge.name} produced no score ({why})"
    kinds = sorted({s.error_kind or "error" for s in failed} | ({"missing"} if missing else set()))
    return (
        f"judge {judge.name}: {len(failed) + missing} of {judge.n} samples failed "
        f"({', '.join(kinds)})"
    )


def evaluate_judges(
    panel: Sequence[Judge], samples: Sequence[SampleResult], within_model: str
) -> JudgeScores:
    """Each judge's samples of one cell aggregated within the model (stage 1)."""
    cells = unique_samples(samples)
    evaluations: dict[str, JudgeEvaluation] = {}
    reasons: list[str] = []
    for judge in panel:
        mine = [cells.get((judge.name, i)) for i in range(judge.n)]
        scores = [s.score for s in mine if s is not None and s.score is not None]
        missing = sum(s is None for s in mine)
        failed = [s for s in mine if s is not None and not s.ok]
        evaluations[judge.name] = aggregate_within_model(
            scores, n_failed=len(failed) + missing, method=within_model
        )
        if not scores or failed or missing:
            reasons.append(_shortfall(judge, failed, missing, bool(scores)))
    return JudgeScores(evaluations, reasons)


def consensus_metrics(
    judged: JudgeScores,
    final: float,
    panel_size: int,
    aggregation: Aggregation,
    tied_vote: bool = False,
) -> tuple[ConsensusMetrics, list[str]]:
    """How far the judges agree on a scored cell and how far to trust its final score (stage
    2 around the final score), with the low-consensus reason to flag it (none, or one)."""
    scored = judged.scored
    cross_std = sample_std(list(scored.values())) or 0.0
    consensus = consensus_level(cross_std, aggregation.consensus_threshold)
    low = consensus == Level.LOW and aggregation.flag_low_consensus
    evaluations = judged.evaluations.values()
    within = [e.within_model_std for e in evaluations if e.within_model_std is not None]
    noisy = bool(within) and statistics.fmean(within) > aggregation.consensus_threshold
    degraded = any(e.n_failed for e in evaluations)
    metrics = ConsensusMetrics(
        final_score=final,
        cross_model_std=cross_std,
        consensus_level=consensus,
        confidence=confidence_level(consensus, len(scored), degraded, noisy),
        # Degraded records (a failed sample, a dropped judge), a tied vote and low consensus go
        # to review.
        flag_for_review=degraded or len(scored) < panel_size or tied_vote or low,
    )
    reasons = (
        [f"low consensus: cross-model std {cross_std:.2f} > {aggregation.consensus_threshold:g}"]
        if low
        else []
    )
    return metrics, reasons


def pass_decision(
    judged: JudgeScores, final: float, weights: dict[str, float], threshold: float, method: str
) -> tuple[bool, str | None]:
    """Whether the cell passes: its final score against the threshold, or with
    `majority_vote` the judges' weighted votes; and why it is flagged if the vote tied."""
    if method != "majority_vote":
        return final >= threshold, None
    vote = majority_vote(judged.scored, weights, threshold)
    if not vote.tied:
        return vote.passed, None
    return (
        vote.passed,
        f"pass/fail vote tied ({vote.pass_weight:g} pass, {vote.fail_weight:g} fail)",
    )


def cell_record(
    item_id: str,
    dimension: Dimension,
    judged: JudgeScores,
    metrics: ConsensusMetrics,
    passed: bool | None,
    flag_reasons: list[str],
    error: str | None = None,
    pairwise: PairwiseOutcome | None = None,
) -> Verdict:
    """The verdict record of one cell from its parts."""
    return Verdict(
        item_id=item_id,
        criterion_id=dimension.name,
        llm_evaluations=judged.evaluations,
        consensus_metrics=metrics,
        passed=passed,
        threshold=dimension.resolved_threshold,
        error=error,
        flag_reasons=flag_reasons,
        pairwise=pairwise,
    )


def unscored_verdict(item_id: str, dimension: Dimension, judged: JudgeScores) -> Verdict:
    """The record of a cell no judge scored: an error, flagged for review."""
    metrics = ConsensusMetrics(
        final_score=None,
        cross_model_std=None,
        consensus_level=None,
        confidence=Level.LOW,
        flag_for_review=True,
    )
    error = "no judge produced a score: " + "; ".join(judged.reasons)
    return cell_record(item_id, dimension, judged, metrics, None, list(judged.reasons), error)


def build_verdict(
    item_id: str,
    dimension: Dimension,
    panel: Sequence[Judge],
    samples: Sequence[SampleResult],
    aggregation: Aggregation,
) -> Verdict:
    """The result record of one (item, dimension) from its raw samples."""
    judged = evaluate_judges(panel, samples, aggregation.within_model)
    weights = {j.name: j.weight for j in panel}
    final = aggregate_across_models(judged.scored, weights, aggregation.across_models)
    if final is None:
        return unscored_verdict(item_id, dimension, judged)
    threshold = dimension.resolved_threshold
    passed, tie = pass_decision(judged, final, weights, threshold, aggregation.across_models)
    metrics, low_consensus = consensus_metrics(
        judged, final, len(panel), aggregation, tied_vote=tie is not None
    )
    reasons = [*low_consensus, *judged.reasons, *([tie] if tie else [])]
    return cell_record(item_id, dimension, judged, metrics, passed, reasons)


def cell_pass_vote(panel: Sequence[Judge], samples: Sequence[SampleResult]) -> PassVote:
    """The judges' pass/fail votes on a cell: one per sample that scored (a failed sample
    neither votes nor counts as a missing vote)."""
    cells = unique_samples(samples)
    votes: dict[str, list[bool | None]] = {}
    for judge in panel:
        mine = [cells.get((judge.name, i)) for i in range(judge.n)]
        votes[judge.name] = [s.vote for s in mine if s is not None and s.ok]
    return pass_vote(votes)
