"""Cell-level storage: raw samples as they arrive, and verdicts with their judge aggregates.

A cell is one (item, dimension) of a batch. Every write is idempotent (unique keys and
INSERT … ON CONFLICT DO NOTHING), so duplicate deliveries and repeated callbacks change nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import case, delete, func, select, update
from sqlalchemy.orm import Session

from schemas.pairwise import PairwiseOutcome
from schemas.results import ConsensusMetrics, JudgeEvaluation, Level, SampleResult, Verdict
from schemas.status import BatchState
from schemas.tasks import CellRef
from store.cache import CacheEntry, keep_cached_answer
from store.engine import write_transaction
from store.models import BatchRow, JudgeAggregateRow, PairOutcomeRow, SampleRow, VerdictRow
from store.repository import batch_row
from store.sql import Sessions, insert_ignoring_duplicates


def save_cell(
    sessions: Sessions,
    cell: CellRef,
    samples: list[SampleResult],
    verdict: Verdict,
    positions: tuple[int, int],
) -> bool:
    """Write a cell's samples, judge aggregates and verdict in one transaction.

    Idempotent: a second call for the same cell inserts nothing and counts nothing. Returns
    whether the verdict was new.
    """
    batch_id, item_id, dimension = cell
    key = {"batch_id": batch_id, "item_id": item_id, "dimension": dimension}
    sample_rows = [_sample_row(cell, s) for s in samples]
    aggregate_rows = [
        {
            **key,
            "judge": judge,
            "position": position,
            "samples": evaluation.samples,
            "aggregated_score": evaluation.aggregated_score,
            "within_model_std": evaluation.within_model_std,
            "n_failed": evaluation.n_failed,
        }
        for position, (judge, evaluation) in enumerate(verdict.llm_evaluations.items())
    ]
    metrics = verdict.consensus_metrics
    verdict_row = {
        **key,
        "item_position": positions[0],
        "dimension_position": positions[1],
        "final_score": metrics.final_score,
        "cross_model_std": metrics.cross_model_std,
        "consensus_level": metrics.consensus_level.value if metrics.consensus_level else None,
        "confidence": metrics.confidence.value,
        "flag_for_review": metrics.flag_for_review,
        "flag_reasons": verdict.flag_reasons,
        "passed": verdict.passed,
        "threshold": verdict.threshold,
        "error": verdict.error,
    }
    with write_transaction(sessions) as session:
        insert_ignoring_duplicates(session, SampleRow, sample_rows)
        insert_ignoring_duplicates(session, JudgeAggregateRow, aggregate_rows)
        if verdict.pairwise is not None:
            outcome = verdict.pairwise.model_dump(mode="json")
            insert_ignoring_duplicates(session, PairOutcomeRow, [{**key, "outcome": outcome}])
        new = insert_ignoring_duplicates(session, VerdictRow, [verdict_row])
        if not new:
            return False
        n_verdicts = BatchRow.n_verdicts + 1
        session.execute(
            update(BatchRow)
            .where(BatchRow.id == batch_id)
            .values(
                n_verdicts=n_verdicts,
                n_samples=BatchRow.n_samples + len(samples),
                n_failed_samples=BatchRow.n_failed_samples + sum(not s.ok for s in samples),
                n_flagged=BatchRow.n_flagged + int(metrics.flag_for_review),
                cost_usd=BatchRow.cost_usd + sum(s.cost_usd for s in samples),
                status=case(
                    (
                        (BatchRow.status == BatchState.RUNNING.value)
                        & (n_verdicts >= BatchRow.n_cells),
                        BatchState.COMPLETED.value,
                    ),
                    else_=BatchRow.status,
                ),
                finished_at=case(
                    (
                        (BatchRow.status == BatchState.RUNNING.value)
                        & (n_verdicts >= BatchRow.n_cells),
                        func.now(),
                    ),
                    else_=BatchRow.finished_at,
                ),
            )
        )
        return True


def iter_verdicts(sessions: Sessions, batch_id: str, chunk: int = 500) -> Iterator[Verdict]:
    """The batch's result records in item order, then dimension order, read in chunks."""
    with sessions() as session:
        batch_row(session, batch_id)
        last: tuple[int, int] = (-1, -1)
        while True:
            rows = list(
                session.scalars(
                    select(VerdictRow)
                    .where(
                        VerdictRow.batch_id == batch_id,
                        (VerdictRow.item_position > last[0])
                        | (
                            (VerdictRow.item_position == last[0])
                            & (VerdictRow.dimension_position > last[1])
                        ),
                    )
                    .order_by(VerdictRow.item_position, VerdictRow.dimension_position)
                    .limit(chunk)
                )
            )
            if not rows:
                return
            evaluations = _evaluations_for(session, batch_id, rows)
            outcomes = _pair_outcomes_for(session, batch_id, rows)
            for row in rows:
                cell = (row.item_id, row.dimension)
                yield _verdict_from_row(row, evaluations.get(cell, {}), outcomes.get(cell))
            last = (rows[-1].item_position, rows[-1].dimension_position)


def _evaluations_for(
    session: Session, batch_id: str, verdicts: list[VerdictRow]
) -> dict[tuple[str, str], dict[str, JudgeEvaluation]]:
    item_ids = sorted({v.item_id for v in verdicts})
    found: dict[tuple[str, str], dict[str, JudgeEvaluation]] = {}
    rows = session.scalars(
        select(JudgeAggregateRow)
        .where(JudgeAggregateRow.batch_id == batch_id, JudgeAggregateRow.item_id.in_(item_ids))
        .order_by(JudgeAggregateRow.position)
    )
    for row in rows:
        found.setdefault((row.item_id, row.dimension), {})[row.judge] = JudgeEvaluation(
            samples=row.samples,
            aggregated_score=row.aggregated_score,
            within_model_std=row.within_model_std,
            n_failed=row.n_failed,
        )
    return found


def _pair_outcomes_for(
    session: Session, batch_id: str, verdicts: list[VerdictRow]
) -> dict[tuple[str, str], PairwiseOutcome]:
    """The pairwise outcomes of these verdicts (none unless the batch is pairwise)."""
    item_ids = sorted({v.item_id for v in verdicts})
    rows = session.scalars(
        select(PairOutcomeRow).where(
            PairOutcomeRow.batch_id == batch_id, PairOutcomeRow.item_id.in_(item_ids)
        )
    )
    return {
        (row.item_id, row.dimension): PairwiseOutcome.model_validate(row.outcome) for row in rows
    }


def _verdict_from_row(
    row: VerdictRow,
    evaluations: dict[str, JudgeEvaluation],
    pairwise: PairwiseOutcome | None = None,
) -> Verdict:
    return Verdict(
        item_id=row.item_id,
        criterion_id=row.dimension,
        llm_evaluations=evaluations,
        consensus_metrics=ConsensusMetrics(
            final_score=row.final_score,
            cross_model_std=row.cross_model_std,
            consensus_level=Level(row.consensus_level) if row.consensus_level else None,
            confidence=Level(row.confidence),
            flag_for_review=row.flag_for_review,
        ),
        passed=row.passed,
        threshold=row.threshold,
        error=row.error,
        flag_reasons=row.flag_reasons or [],
        pairwise=pairwise,
    )


def list_samples(sessions: Sessions, cell: CellRef) -> list[SampleResult]:
    """The raw samples of one cell, errors included, in (judge, sample) order."""
    batch_id, item_id, dimension = cell
    with sessions() as session:
        rows = session.scalars(
            select(SampleRow)
            .where(
                SampleRow.batch_id == batch_id,
                SampleRow.item_id == item_id,
                SampleRow.dimension == dimension,
            )
            .order_by(SampleRow.judge, SampleRow.sample)
        )
        fields = SampleResult.model_fields
        return [SampleResult.model_validate({f: getattr(row, f) for f in fields}) for row in rows]


def count_batch_samples(sessions: Sessions, batch_id: str) -> int:
    """How many samples of the batch are stored, in cells finished or not."""
    with sessions() as session:
        found = session.scalar(
            select(func.count()).select_from(SampleRow).where(SampleRow.batch_id == batch_id)
        )
        return int(found or 0)


def count_cell_samples(sessions: Sessions, cell: CellRef) -> int:
    """How many samples of the cell are stored (an index-only count on the unique key)."""
    batch_id, item_id, dimension = cell
    with sessions() as session:
        return (
            session.scalar(
                select(func.count())
                .select_from(SampleRow)
                .where(
                    SampleRow.batch_id == batch_id,
                    SampleRow.item_id == item_id,
                    SampleRow.dimension == dimension,
                )
            )
            or 0
        )


def _sample_row(cell: CellRef, sample: SampleResult) -> dict[str, object]:
    return {
        "batch_id": cell.batch_id,
        "item_id": cell.item_id,
        "dimension": cell.dimension,
        **sample.model_dump(),
    }


def record_sample(
    sessions: Sessions, cell: CellRef, sample: SampleResult, cache: CacheEntry | None = None
) -> bool:
    """Store one sample as soon as it exists (and the answer to cache, in the same
    transaction: one write, not two); a second delivery of the same task is a no-op."""
    with write_transaction(sessions) as session:
        new = bool(insert_ignoring_duplicates(session, SampleRow, [_sample_row(cell, sample)]))
        if cache is not None:
            keep_cached_answer(session, cache)
        return new


def complete_cells_without_verdict(
    sessions: Sessions, batch_id: str, samples_per_cell: int, limit: int = 1000
) -> list[CellRef]:
    """Cells whose samples are all stored but whose verdict is not: the sweeper's work."""
    verdict = (
        select(VerdictRow.id)
        .where(
            VerdictRow.batch_id == SampleRow.batch_id,
            VerdictRow.item_id == SampleRow.item_id,
            VerdictRow.dimension == SampleRow.dimension,
        )
        .exists()
    )
    with sessions() as session:
        rows = session.execute(
            select(SampleRow.item_id, SampleRow.dimension)
            .where(SampleRow.batch_id == batch_id, ~verdict)
            .group_by(SampleRow.item_id, SampleRow.dimension)
            .having(func.count() >= samples_per_cell)
            .limit(limit)
        )
        return [CellRef(batch_id, item_id, dimension) for item_id, dimension in rows]


def stored_sample_keys(
    sessions: Sessions, batch_id: str, item_ids: list[str]
) -> dict[tuple[str, str], dict[tuple[str, int], bool]]:
    """For each (item, dimension): which (judge, sample) are stored, and whether each scored."""
    found: dict[tuple[str, str], dict[tuple[str, int], bool]] = {}
    with sessions() as session:
        rows = session.execute(
            select(
                SampleRow.item_id,
                SampleRow.dimension,
                SampleRow.judge,
                SampleRow.sample,
                SampleRow.score.is_not(None),
            ).where(SampleRow.batch_id == batch_id, SampleRow.item_id.in_(item_ids))
        )
        for item_id, dimension, judge, sample, ok in rows:
            found.setdefault((item_id, dimension), {})[(judge, sample)] = bool(ok)
    return found


def reopen_cells(
    sessions: Sessions, batch_id: str, redo: dict[tuple[str, str], list[tuple[str, int]]]
) -> None:
    """Forget the verdicts of these cells and the given (failed) samples, so they can be
    judged again; the batch's counters are recomputed."""
    with write_transaction(sessions) as session:
        for (item_id, dimension), samples in redo.items():
            cell = (
                (SampleRow.batch_id == batch_id)
                & (SampleRow.item_id == item_id)
                & (SampleRow.dimension == dimension)
            )
            for judge, index in samples:
                session.execute(
                    delete(SampleRow).where(
                        cell, SampleRow.judge == judge, SampleRow.sample == index
                    )
                )
            for table in (VerdictRow, JudgeAggregateRow, PairOutcomeRow):
                session.execute(
                    delete(table).where(
                        table.batch_id == batch_id,
                        table.item_id == item_id,
                        table.dimension == dimension,
                    )
                )
        recount_batch(session, batch_id)


def recount_batch(session: Session, batch_id: str) -> None:
    """Recompute a batch's progress counters from its rows (after cells were reopened)."""
    verdicts = select(VerdictRow).where(VerdictRow.batch_id == batch_id).subquery()
    n_verdicts, n_flagged = session.execute(
        select(
            func.count(), func.coalesce(func.sum(case((verdicts.c.flag_for_review, 1), else_=0)), 0)
        )
    ).one()
    finished = (
        select(SampleRow)
        .join(
            VerdictRow,
            (VerdictRow.batch_id == SampleRow.batch_id)
            & (VerdictRow.item_id == SampleRow.item_id)
            & (VerdictRow.dimension == SampleRow.dimension),
        )
        .where(SampleRow.batch_id == batch_id)
        .subquery()
    )
    n_samples, n_failed, cost = session.execute(
        select(
            func.count(),
            func.coalesce(func.sum(case((finished.c.score.is_(None), 1), else_=0)), 0),
            func.coalesce(func.sum(finished.c.cost_usd), 0.0),
        )
    ).one()
    session.execute(
        update(BatchRow)
        .where(BatchRow.id == batch_id)
        .values(
            n_verdicts=n_verdicts,
            n_flagged=n_flagged,
            n_samples=n_samples,
            n_failed_samples=n_failed,
            cost_usd=cost,
        )
    )


def stored_cost(sessions: Sessions, batch_id: str) -> float:
    """What the batch's stored samples cost, in US dollars."""
    with sessions() as session:
        total = session.scalar(
            select(func.coalesce(func.sum(SampleRow.cost_usd), 0.0)).where(
                SampleRow.batch_id == batch_id
            )
        )
    return float(total or 0.0)
