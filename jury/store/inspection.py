"""Reads for people looking at batches: recent batches, the samples as they are stored, and
every sample of an item (`jury list`, `jury show`, `jury results --samples`, progress)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sqlalchemy import case, func, select

from jury.schemas.batch import BatchConfig
from jury.schemas.results import SampleResult, Verdict
from jury.schemas.status import BatchStatus, StoredSamples
from jury.store.cells import _evaluations_for, _pair_outcomes_for, _verdict_from_row
from jury.store.counted import planned, sample_totals
from jury.store.models import BatchRow, SampleRow, VerdictRow
from jury.store.repository import batch_status, iter_item_ids, load_config
from jury.store.sql import Sessions


def stored_samples(
    sessions: Sessions, batch_id: str, config: BatchConfig | None = None
) -> StoredSamples:
    """The batch's samples stored so far that count (store.counted): rows it plans, failed
    unless scored within their range, each cost where it is one. `config`: the batch's, when
    the caller holds it already."""
    config = config or load_config(sessions, batch_id)
    with sessions() as session:
        cached_rows = func.coalesce(func.sum(case((SampleRow.cached, 1), else_=0)), 0)
        stored, failed, cost, cached = session.execute(
            select(*sample_totals(config), cached_rows).where(
                SampleRow.batch_id == batch_id, planned(config)
            )
        ).one()
    return StoredSamples(int(stored), int(failed), float(cost), int(cached))


def recent_batches(sessions: Sessions, limit: int = 20) -> list[BatchStatus]:
    """The most recently submitted batches, newest first."""
    with sessions() as session:
        ids = list(
            session.scalars(select(BatchRow.id).order_by(BatchRow.created_at.desc()).limit(limit))
        )
    return [batch_status(sessions, batch_id) for batch_id in ids]


@dataclass(frozen=True)
class StoredSample:
    """One stored sample with the cell it belongs to."""

    item_id: str
    dimension: str
    result: SampleResult


def in_panel_order(config: BatchConfig, samples: list[StoredSample]) -> list[StoredSample]:
    """Samples in dimension order, then panel order, then sample index."""
    dimensions = {d.name: n for n, d in enumerate(config.dimensions)}
    judges = {j.name: n for n, j in enumerate(config.judges)}
    return sorted(
        samples,
        key=lambda s: (
            dimensions.get(s.dimension, len(dimensions)),
            judges.get(s.result.judge, len(judges)),
            s.result.sample,
        ),
    )


def samples_of_items(
    sessions: Sessions, batch_id: str, item_ids: list[str], dimension: str | None = None
) -> list[StoredSample]:
    """The stored samples of these items (of one dimension, if given), in no set order."""
    fields = list(SampleResult.model_fields)
    query = select(SampleRow).where(SampleRow.batch_id == batch_id, SampleRow.item_id.in_(item_ids))
    if dimension is not None:
        query = query.where(SampleRow.dimension == dimension)
    with sessions() as session:
        return [
            StoredSample(
                row.item_id,
                row.dimension,
                SampleResult.model_validate({f: getattr(row, f) for f in fields}),
            )
            for row in session.scalars(query)
        ]


def item_samples(
    sessions: Sessions, batch_id: str, item_id: str, dimension: str | None = None
) -> list[StoredSample]:
    """Every stored sample of one item (of one dimension, if given), in dimension, panel and
    sample order."""
    config = load_config(sessions, batch_id)
    return in_panel_order(config, samples_of_items(sessions, batch_id, [item_id], dimension))


def iter_batch_samples(sessions: Sessions, batch_id: str) -> Iterator[StoredSample]:
    """Every stored sample of the batch, in item order, read a chunk of items at a time."""
    config = load_config(sessions, batch_id)
    for item_ids in iter_item_ids(sessions, batch_id):
        position = {item_id: n for n, item_id in enumerate(item_ids)}
        chunk = in_panel_order(config, samples_of_items(sessions, batch_id, item_ids))
        yield from sorted(chunk, key=lambda s: position[s.item_id])  # stable: keeps the rest


def item_verdicts(sessions: Sessions, batch_id: str, item_id: str) -> dict[str, Verdict]:
    """The stored verdicts of one item, by dimension, in dimension order."""
    with sessions() as session:
        rows = list(
            session.scalars(
                select(VerdictRow)
                .where(VerdictRow.batch_id == batch_id, VerdictRow.item_id == item_id)
                .order_by(VerdictRow.dimension_position)
            )
        )
        # The record shape is built by the cells module, the one place that reads verdicts.
        evaluations = _evaluations_for(session, batch_id, rows)
        outcomes = _pair_outcomes_for(session, batch_id, rows)
        return {
            row.dimension: _verdict_from_row(
                row,
                evaluations.get((item_id, row.dimension), {}),
                outcomes.get((item_id, row.dimension)),
            )
            for row in rows
        }
