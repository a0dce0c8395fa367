"""Storing the samples of the combined and pairwise modes.

A combined task stores one sample per dimension, a pairwise sample its four scores beside it:
all in one transaction with INSERT … ON CONFLICT DO NOTHING, so a task delivered twice, or
killed and run again, stores each sample once and never a sample without its detail.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select

from schemas.pairwise import PairJudgment
from schemas.results import SampleResult
from schemas.tasks import CellRef
from store.engine import write_transaction
from store.models import PairJudgmentRow, SampleRow
from store.sql import Sessions, insert_ignoring_duplicates


def record_samples(
    sessions: Sessions,
    samples: Iterable[tuple[CellRef, SampleResult, PairJudgment | None]],
) -> int:
    """Store samples of one or more cells, each with its pair judgment if it has one; returns
    how many samples were new."""
    sample_rows = []
    pair_rows = []
    for cell, result, pair in samples:
        key = {"batch_id": cell.batch_id, "item_id": cell.item_id, "dimension": cell.dimension}
        sample_rows.append({**key, **result.model_dump()})
        if pair is not None:
            pair_rows.append(
                {**key, "judge": result.judge, "sample": result.sample, **pair._asdict()}
            )
    with write_transaction(sessions) as session:
        new = insert_ignoring_duplicates(session, SampleRow, sample_rows)
        insert_ignoring_duplicates(session, PairJudgmentRow, pair_rows)
        return new


def pair_judgments(sessions: Sessions, cell: CellRef) -> dict[tuple[str, int], PairJudgment]:
    """The pair judgments of one cell, by (judge, sample)."""
    with sessions() as session:
        rows = session.scalars(
            select(PairJudgmentRow).where(
                PairJudgmentRow.batch_id == cell.batch_id,
                PairJudgmentRow.item_id == cell.item_id,
                PairJudgmentRow.dimension == cell.dimension,
            )
        )
        return {
            (row.judge, row.sample): PairJudgment(
                row.a_first_a, row.a_first_b, row.b_first_a, row.b_first_b
            )
            for row in rows
        }
