"""Cell-level storage: raw samples as they arrive, and verdicts with their judge aggregates.

A cell is one (item, dimension) of a batch. Every write is idempotent (unique keys and
INSERT … ON CONFLICT DO NOTHING), so duplicate deliveries and repeated callbacks change nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from sqlalchemy import Float, Integer, Update, bindparam, case, delete, func, select, update
from sqlalchemy.orm import Session

from jury.schemas.batch import BatchConfig
from jury.schemas.judge_prompts import PassVote
from jury.schemas.pairwise import PairwiseOutcome
from jury.schemas.results import ConsensusMetrics, JudgeEvaluation, Level, SampleResult, Verdict
from jury.schemas.status import BatchState
from jury.schemas.tasks import CellRef
from jury.store.counted import planned, sample_totals
from jury.store.engine import write_transaction
from jury.store.models import BatchRow, JudgeAggregateRow, PairOutcomeRow, SampleRow, VerdictRow
from jury.store.outcome import settle_outcome
from jury.store.repository import batch_row
from jury.store.sql import Sessions, insert_ignoring_duplicates


@dataclass(frozen=True)
class CellVerdict:
    """A cell's verdict to write, with the samples it was built from and its positions."""

    cell: CellRef
    samples: list[SampleResult]
    verdict: Verdict
    positions: tuple[int, int]  # (item position, dimension position)


def save_cell(
    sessions: Sessions,
    cell: CellRef,
    samples: list[SampleResult],
    verdict: Verdict,
    positions: tuple[int, int],
) -> bool:
    """Write a cell's judge aggregates and verdict; whether the verdict was new."""
    return save_cells(sessions, [CellVerdict(cell, samples, verdict, positions)]).written[0]


@dataclass(frozen=True)
class SavedCells:
    written: list[bool]  # for each cell, whether its verdict was new
    ended: list[str]  # the batches these verdicts completed (their last cells)


def save_cells(sessions: Sessions, cells: Sequence[CellVerdict]) -> SavedCells:
    """Write cells' judge aggregates and verdicts in one transaction, and count the samples
    each was built from into its batch's progress (the samples themselves were stored as they
    arrived, jury.store.samples).

    Idempotent: a second write of the same cell inserts nothing and counts nothing. Returns,
    for each cell, whether its verdict was new, and the batches that ended with them.
    """
    written: list[bool] = []
    counts: dict[str, _Counts] = {}
    ended: list[str] = []
    with write_transaction(sessions) as session:
        for entry in cells:
            new = _write_verdict(session, entry)
            written.append(new)
            if new:
                counts.setdefault(entry.cell.batch_id, _Counts()).add(entry)
        for batch_id, batch_counts in counts.items():
            if _count_verdicts(session, batch_id, batch_counts):
                ended.append(batch_id)
    return SavedCells(written, ended)


@dataclass
class _Counts:
    verdicts: int = 0
    samples: int = 0
    failed: int = 0
    flagged: int = 0
    cost: float = 0.0

    def add(self, entry: CellVerdict) -> None:
        self.verdicts += 1
        self.samples += len(entry.samples)
        self.failed += sum(not s.ok for s in entry.samples)
        self.flagged += int(entry.verdict.consensus_metrics.flag_for_review)
        self.cost += sum(s.cost_usd for s in entry.samples)


def _write_verdict(session: Session, entry: CellVerdict) -> bool:
    batch_id, item_id, dimension = entry.cell
    verdict = entry.verdict
    key = {"batch_id": batch_id, "item_id": item_id, "dimension": dimension}
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
        "item_position": entry.positions[0],
        "dimension_position": entry.positions[1],
        "final_score": metrics.final_score,
        "cross_model_std": metrics.cross_model_std,
        "consensus_level": metrics.consensus_level.value if metrics.consensus_level else None,
        "confidence": metrics.confidence.value,
        "flag_for_review": metrics.flag_for_review,
        "flag_reasons": verdict.flag_reasons,
        "passed": verdict.passed,
        "threshold": verdict.threshold,
        "error": verdict.error,
        "pass_vote": verdict.pass_vote.model_dump() if verdict.pass_vote else None,
    }
    insert_ignoring_duplicates(session, JudgeAggregateRow, aggregate_rows)
    if verdict.pairwise is not None:
        outcome = verdict.pairwise.model_dump(mode="json")
        insert_ignoring_duplicates(session, PairOutcomeRow, [{**key, "outcome": outcome}])
    return bool(insert_ignoring_duplicates(session, VerdictRow, [verdict_row]))


def _count_verdicts(session: Session, batch_id: str, counts: _Counts) -> bool:
    """The batch's progress counters, and its end when these verdicts were its last (then
    True)."""
    state = session.execute(
        _COUNT_VERDICTS,
        {
            "batch": batch_id,
            "verdicts": counts.verdicts,
            "samples": counts.samples,
            "failed": counts.failed,
            "flagged": counts.flagged,
            "cost": counts.cost,
        },
    ).scalar()
    if state != BatchState.COMPLETED.value:
        return False
    settle_outcome(session, batch_id)  # its last verdict: completed, degraded or failed
    return True


def _count_verdicts_statement() -> Update:
    """Built once: building the expression for every group of verdicts cost the aggregating
    worker more than running it."""
    n_verdicts = BatchRow.n_verdicts + bindparam("verdicts", type_=Integer)
    last = (BatchRow.status == BatchState.RUNNING.value) & (n_verdicts >= BatchRow.n_cells)
    return (
        update(BatchRow)
        .where(BatchRow.id == bindparam("batch"))
        .values(
            n_verdicts=n_verdicts,
            n_samples=BatchRow.n_samples + bindparam("samples", type_=Integer),
            n_failed_samples=BatchRow.n_failed_samples + bindparam("failed", type_=Integer),
            n_flagged=BatchRow.n_flagged + bindparam("flagged", type_=Integer),
            cost_usd=BatchRow.cost_usd + bindparam("cost", type_=Float),
            status=case((last, BatchState.COMPLETED.value), else_=BatchRow.status),
            finished_at=case((last, func.now()), else_=BatchRow.finished_at),
        )
        .returning(BatchRow.status)
    )


_COUNT_VERDICTS = _count_verdicts_statement()


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
        pass_vote=PassVote.model_validate(row.pass_vote) if row.pass_vote else None,
    )


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
    config = BatchConfig.model_validate(batch_row(session, batch_id).config)
    finished = (
        select(SampleRow)
        .join(
            VerdictRow,
            (VerdictRow.batch_id == SampleRow.batch_id)
            & (VerdictRow.item_id == SampleRow.item_id)
            & (VerdictRow.dimension == SampleRow.dimension),
        )
        .where(SampleRow.batch_id == batch_id, planned(config))
        .subquery()
    )
    n_samples, n_failed, cost = session.execute(select(*sample_totals(config, finished.c))).one()
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
