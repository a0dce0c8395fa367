"""A pairwise cell's verdict: the two-stage aggregation of its preferences (worker.aggregation),
then the winner, the agreement and the position bias read from its pair judgments."""

from __future__ import annotations

from schemas.pairwise import pairwise_outcome
from schemas.results import SampleResult, Verdict
from schemas.tasks import CellRef
from store.mode_samples import pair_judgments
from store.sql import Sessions


def with_pairwise_outcome(
    sessions: Sessions,
    cell: CellRef,
    verdict: Verdict,
    kept: list[SampleResult],
    tie_tolerance: float,
) -> Verdict:
    """A pairwise cell's verdict: its winner and agreement added; `passed` is null, since a
    comparison has a winner, not a pass mark."""
    details = pair_judgments(sessions, cell)
    judgments = [
        details[(s.judge, s.sample)] for s in kept if s.ok and (s.judge, s.sample) in details
    ]
    outcome = pairwise_outcome(verdict.consensus_metrics.final_score, judgments, tie_tolerance)
    return verdict.model_copy(update={"passed": None, "pairwise": outcome})
