"""Result records as CSV: one row per record, a column per judge (and per aggregation,
pairwise side, label or calibration where the batch has them). Streamed."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from typing import IO, Any

from jury.results.formats import Summary
from jury.schemas.results import UNCERTAINTY_FIELDS, Verdict

CSV_COLUMNS = [
    "item_id",
    "criterion_id",
    "final_score",
    "cross_model_std",
    "consensus_level",
    "confidence",
    "flag_for_review",
    "passed",
    "threshold",
    "error",
]


PAIRWISE_CSV_COLUMNS = [
    "winner",
    "score_a",
    "score_b",
    "agreement_pct",
    "position_consistency_pct",
    "first_position_bias",
    "std_a",
    "std_b",
    "majority_winner",
    "majority_agreement_pct",
    "majority_tied_between",  # the winners sharing the top count, `A|B`, when no one has it
    "name_a",
    "name_b",
    "winner_name",
]


CALIBRATED_CSV_COLUMNS = ["calibrated_final_score", "calibrated_passed"]

# With `pass_vote: true` (schemas.judge_prompts.PassVote).
PASS_VOTE_CSV_COLUMNS = ["vote_share", "passed_by_vote", "votes_missing"]


def csv_columns(
    judges: list[str],
    pairwise: bool = False,
    labelled: bool = False,
    calibrated: bool = False,
    methods: Sequence[str] = (),
    pass_vote: bool = False,
) -> list[str]:
    """The flat columns of a record: CSV_COLUMNS, each judge's score, std and failed count,
    a pairwise batch's winner and agreement, a labelled batch people's label, a calibrated
    one the calibrated final score and verdict, then the score by each side-by-side method
    (`aggregation:median`), and with a pass vote its share, verdict and missing votes."""
    judge_columns = [f"{j}:{part}" for j in judges for part in ("score", "std", "n_failed")]
    return (
        CSV_COLUMNS
        + judge_columns
        + (PAIRWISE_CSV_COLUMNS if pairwise else [])
        + (["human_label"] if labelled else [])
        + (CALIBRATED_CSV_COLUMNS if calibrated else [])
        + [f"aggregation:{method}" for method in methods]
        + (PASS_VOTE_CSV_COLUMNS if pass_vote else [])
    )


def record_row(
    verdict: Verdict,
    judges: list[str],
    pairwise: bool = False,
    labelled: bool = False,
    calibrated: bool = False,
    methods: Sequence[str] = (),
    pass_vote: bool = False,
) -> list[Any]:
    """A record as one flat row, in csv_columns order (CSV, DataFrames)."""
    m = verdict.consensus_metrics
    row: list[Any] = [
        verdict.item_id,
        verdict.criterion_id,
        m.final_score,
        m.cross_model_std,
        m.consensus_level.value if m.consensus_level else "",
        m.confidence.value,
        m.flag_for_review,
        verdict.passed,
        verdict.threshold,
        verdict.error or "",
    ]
    for judge in judges:
        e = verdict.llm_evaluations.get(judge)
        row += [e.aggregated_score, e.within_model_std, e.n_failed] if e else ["", "", ""]
    if pairwise:
        outcome = verdict.pairwise.model_dump() if verdict.pairwise else {}
        row += [_cell(outcome.get(column)) for column in PAIRWISE_CSV_COLUMNS]
    if labelled:
        row.append("" if verdict.human_label is None else verdict.human_label)
    if calibrated:
        scores = verdict.calibrated
        row += [scores.final_score, scores.passed] if scores else ["", ""]
    side = verdict.aggregations or {}
    row += ["" if side.get(m) is None else side[m] for m in methods]
    if pass_vote:
        vote = verdict.pass_vote
        row += (
            [
                "" if vote.share is None else vote.share,
                "" if vote.passed_by_vote is None else vote.passed_by_vote,
                vote.n_missing,
            ]
            if vote
            else ["", "", ""]
        )
    return row


def _cell(value: object) -> object:
    """A pairwise part as one CSV cell: a list joined by `|`, nothing as empty."""
    if value is None:
        return ""
    return "|".join(map(str, value)) if isinstance(value, list) else value


def write_csv(
    out: IO[str],
    verdicts: Iterable[Verdict],
    judges: list[str],
    pairwise: bool = False,
    labelled: bool = False,
    calibrated: bool = False,
    methods: Sequence[str] = (),
    uncertainty: bool = True,
    pass_vote: bool = False,
) -> Summary:
    """One row per record (csv_columns, record_row); without `uncertainty`, the columns of
    the uncertainty metrics (a batch's `report_uncertainty: false`) are left out."""
    summary = Summary()
    writer = csv.writer(out)
    columns = csv_columns(judges, pairwise, labelled, calibrated, methods, pass_vote)
    hidden = {*UNCERTAINTY_FIELDS, *(f"{j}:std" for j in judges)} if not uncertainty else set()
    kept = [index for index, column in enumerate(columns) if column not in hidden]
    writer.writerow([columns[index] for index in kept])
    for verdict in verdicts:
        row = record_row(
            summary.add(verdict), judges, pairwise, labelled, calibrated, methods, pass_vote
        )
        writer.writerow([row[index] for index in kept])
    return summary
