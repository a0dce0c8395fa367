"""The records the trust report (schemas.trust) is computed from, gathered while result
records stream past.

Every record adds its judges' scores and its final score to a column per judge (a float per
record, NaN where the judge has none), for the judges' agreement with each other; a record
that carries people's label (`human_label`, added when records are read) is also kept, for
the agreement with people and its bootstrap intervals. So memory grows with the records by a
few floats each, and with the labelled ones by a small object each.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field

from jury.schemas.pairwise import Winner, winner_of
from jury.schemas.results import Verdict
from jury.schemas.trust import Kind

PANEL = "panel"
MISSING = math.nan


@dataclass(frozen=True)
class LabelledRecord:
    item_id: str
    threshold: float
    scores: dict[str, float]  # judges' aggregated scores (pairwise: preference for A)
    final: float | None
    passed: bool | None
    score_label: float | None = None  # scored batches: people's score
    side_label: Winner | None = None  # pairwise batches: the side people preferred
    winners: dict[str, Winner] = field(default_factory=dict)  # pairwise: each judge's side
    panel_winner: Winner | None = None


@dataclass
class DimensionRecords:
    """One dimension's records: a score column per judge, the final scores, the labelled."""

    kind: Kind
    judges: dict[str, int] = field(default_factory=dict)
    columns: list[array[float]] = field(default_factory=list)
    finals: array[float] = field(default_factory=lambda: array("d"))
    labelled: list[LabelledRecord] = field(default_factory=list)

    @property
    def n_records(self) -> int:
        return len(self.finals)

    def add(self, verdict: Verdict) -> None:
        for judge in verdict.llm_evaluations:
            if judge not in self.judges:
                self.judges[judge] = len(self.columns)
                self.columns.append(array("d", [MISSING]) * self.n_records)
        scores = {
            judge: e.aggregated_score
            for judge, e in verdict.llm_evaluations.items()
            if e.aggregated_score is not None
        }
        for judge, column in self.judges.items():
            self.columns[column].append(scores.get(judge, MISSING))
        final = verdict.consensus_metrics.final_score
        self.finals.append(MISSING if final is None else final)
        label = verdict.human_label
        if label is None:
            return
        record = (verdict.item_id, verdict.threshold, scores, final, verdict.passed)
        if self.kind == "pairwise" and isinstance(label, str):
            tolerance = verdict.pairwise.tie_tolerance if verdict.pairwise else 0.0
            self.labelled.append(
                LabelledRecord(
                    *record,
                    side_label=label,
                    winners={j: winner_of(s, tolerance) for j, s in scores.items()},
                    panel_winner=verdict.pairwise.winner if verdict.pairwise else None,
                )
            )
        elif self.kind == "scores" and not isinstance(label, str):
            self.labelled.append(LabelledRecord(*record, score_label=label))

    def values(self, rater: str) -> list[float | None]:
        """A rater's score on each labelled record (the panel's: the final score)."""
        if rater == PANEL:
            return [r.final for r in self.labelled]
        return [r.scores.get(rater) for r in self.labelled]

    def passes(self, rater: str) -> list[bool | None]:
        """A rater's pass/fail on each labelled record: a judge's score against the threshold,
        the panel's verdict (which a majority vote decides, not the final score)."""
        if rater == PANEL:
            return [
                r.passed if r.passed is not None or r.final is None else r.final >= r.threshold
                for r in self.labelled
            ]
        return [
            None if v is None else v >= r.threshold
            for v, r in zip(self.values(rater), self.labelled, strict=True)
        ]

    def sides(self, rater: str) -> list[Winner | None]:
        if rater == PANEL:
            return [r.panel_winner for r in self.labelled]
        return [r.winners.get(rater) for r in self.labelled]


class TrustRecords:
    """Records in, per dimension; `jury.analysis.trust.trust_report` reads them."""

    def __init__(self) -> None:
        self.dimensions: dict[str, DimensionRecords] = {}

    def add(self, verdict: Verdict) -> Verdict:
        kind: Kind = "pairwise" if verdict.pairwise is not None else "scores"
        self.dimensions.setdefault(verdict.criterion_id, DimensionRecords(kind)).add(verdict)
        return verdict

    @property
    def n_labelled(self) -> int:
        return sum(len(d.labelled) for d in self.dimensions.values())
