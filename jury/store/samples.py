"""Samples as they arrive: one row per (item, dimension, judge, sample), written once.

A judge task stores every sample its call gave (one per dimension it scored, each with its
pair scores in a pairwise batch) in one transaction, with the answer to keep in the result
cache: INSERT … ON CONFLICT DO NOTHING on the sample's unique key, so a task delivered twice,
or killed and run again, stores each sample once and never a sample without its detail.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, tuple_

from jury.schemas.pairwise import PairJudgment
from jury.schemas.results import CellSample, SampleResult
from jury.schemas.tasks import CellRef
from jury.store.cache import CacheEntry
from jury.store.counted import counted_cost
from jury.store.engine import core_transaction
from jury.store.models import (
    CachedAnswerRow,
    ChordCallbackRow,
    PairJudgmentRow,
    SampleRow,
    VerdictRow,
)
from jury.store.sql import Sessions, insert_ignoring_duplicates, inserted_rows


@dataclass(frozen=True)
class SampleWrite:
    """One judge task's samples (of one item), and the answer to keep in the result cache."""

    batch_id: str
    item_id: str
    samples: Sequence[CellSample]
    cache: CacheEntry | None = None


def record_writes(sessions: Sessions, writes: Sequence[SampleWrite]) -> list[set[str]]:
    """Store the samples of many tasks (their pair scores and cached answers) in one
    transaction; returns, for each write, the dimensions whose sample was new (none when the
    task was delivered before)."""
    rows: list[dict[str, object]] = []
    pairs: list[dict[str, object]] = []
    cached = [w.cache.row() for w in writes if w.cache is not None]
    for write in writes:
        key = {"batch_id": write.batch_id, "item_id": write.item_id}
        for s in write.samples:
            rows.append({**key, "dimension": s.dimension, **s.result.model_dump()})
            if s.pair is not None:
                who = {"judge": s.result.judge, "sample": s.result.sample}
                pairs.append({**key, "dimension": s.dimension, **who, **s.pair._asdict()})
    columns = (SampleRow.batch_id, SampleRow.item_id, SampleRow.dimension)
    with core_transaction(sessions) as session:
        new = set(
            inserted_rows(session, SampleRow, rows, *columns, SampleRow.judge, SampleRow.sample)
        )
        insert_ignoring_duplicates(session, PairJudgmentRow, pairs)
        insert_ignoring_duplicates(session, CachedAnswerRow, cached)
    return [
        {
            s.dimension
            for s in w.samples
            if (w.batch_id, w.item_id, s.dimension, s.result.judge, s.result.sample) in new
        }
        for w in writes
    ]


def record_samples(
    sessions: Sessions,
    batch_id: str,
    item_id: str,
    samples: Sequence[CellSample],
    cache: CacheEntry | None = None,
) -> set[str]:
    """Store one task's samples (and the answer to cache) in one transaction; returns the
    dimensions whose sample was new."""
    return record_writes(sessions, [SampleWrite(batch_id, item_id, samples, cache)])[0]


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


def list_samples(sessions: Sessions, cell: CellRef) -> list[SampleResult]:
    """The raw samples of one cell, errors included, in (judge, sample) order."""
    return samples_of_cells(sessions, [cell]).get(cell, [])


_SAMPLE_COLUMNS = [getattr(SampleRow, f) for f in SampleResult.model_fields]


def samples_of_cells(
    sessions: Sessions, cells: Sequence[CellRef]
) -> dict[CellRef, list[SampleResult]]:
    """The raw samples of many cells (one query per batch), each in (judge, sample) order."""
    by_batch: dict[str, list[tuple[str, str]]] = {}
    for cell in cells:
        by_batch.setdefault(cell.batch_id, []).append((cell.item_id, cell.dimension))
    found: dict[CellRef, list[SampleResult]] = {}
    fields = list(SampleResult.model_fields)
    with core_transaction(sessions, write=False) as session:
        for batch_id, keys in by_batch.items():
            rows = session.execute(
                select(SampleRow.item_id, SampleRow.dimension, *_SAMPLE_COLUMNS)
                .where(
                    SampleRow.batch_id == batch_id,
                    tuple_(SampleRow.item_id, SampleRow.dimension).in_(keys),
                )
                .order_by(SampleRow.judge, SampleRow.sample)
            )
            for item_id, dimension, *values in rows:
                result = SampleResult.model_validate(dict(zip(fields, values, strict=True)))
                found.setdefault(CellRef(batch_id, item_id, dimension), []).append(result)
    return found


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


def _of_the_samples_cell(row: type[VerdictRow] | type[ChordCallbackRow]) -> tuple[Any, ...]:
    """A correlated row's conditions for naming the same cell as the sample row."""
    return (
        row.batch_id == SampleRow.batch_id,
        row.item_id == SampleRow.item_id,
        row.dimension == SampleRow.dimension,
    )


def complete_cells_without_verdict(
    sessions: Sessions,
    batch_id: str,
    samples_per_cell: int,
    claimed_before: datetime | None = None,
    limit: int = 1000,
) -> list[CellRef]:
    """Cells whose samples are all stored but whose verdict is not: the sweeper's work.
    With `claimed_before`, a cell whose callback was claimed after it is left out: its
    callback is on its way (queued behind the tasks a worker holds), and aggregating it
    here too would do the callback's work twice."""
    verdict = select(VerdictRow.id).where(*_of_the_samples_cell(VerdictRow)).exists()
    query = select(SampleRow.item_id, SampleRow.dimension).where(
        SampleRow.batch_id == batch_id, ~verdict
    )
    if claimed_before is not None:
        recent_claim = (
            select(ChordCallbackRow.id)
            .where(
                *_of_the_samples_cell(ChordCallbackRow),
                ChordCallbackRow.created_at > claimed_before,
            )
            .exists()
        )
        query = query.where(~recent_claim)
    with sessions() as session:
        rows = session.execute(
            query.group_by(SampleRow.item_id, SampleRow.dimension)
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


def stored_cost(sessions: Sessions, batch_id: str) -> float:
    """What the batch's stored samples cost, in US dollars (each cost where it is one:
    store.counted)."""
    with sessions() as session:
        total = session.scalar(
            select(func.coalesce(func.sum(counted_cost()), 0.0)).where(
                SampleRow.batch_id == batch_id
            )
        )
    return float(total or 0.0)


def count_cells(sessions: Sessions, cells: Sequence[CellRef]) -> dict[CellRef, int]:
    """How many distinct samples each of these cells has stored (index-only, one query per
    batch)."""
    by_batch: dict[str, list[tuple[str, str]]] = {}
    for cell in cells:
        by_batch.setdefault(cell.batch_id, []).append((cell.item_id, cell.dimension))
    counts: dict[CellRef, int] = {}
    with core_transaction(sessions, write=False) as session:
        for batch_id, keys in by_batch.items():
            rows = session.execute(
                select(SampleRow.item_id, SampleRow.dimension, func.count())
                .where(
                    SampleRow.batch_id == batch_id,
                    tuple_(SampleRow.item_id, SampleRow.dimension).in_(keys),
                )
                .group_by(SampleRow.item_id, SampleRow.dimension)
            )
            for item_id, dimension, count in rows:
                counts[CellRef(batch_id, item_id, dimension)] = int(count)
    return counts
