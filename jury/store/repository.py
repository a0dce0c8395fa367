"""Batch-level storage: batches, their items and their progress. Schemas in, schemas out."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from jury.errors import BatchExistsError, UnknownBatchError
from jury.schemas.batch import BatchConfig, Item
from jury.schemas.status import BatchState, BatchStatus
from jury.store.engine import write_transaction
from jury.store.models import BatchRow, EscalationRow, ItemRow, utcnow
from jury.store.outcome import settle_outcome
from jury.store.sql import Sessions, insert_ignoring_duplicates


def create_batch(
    sessions: Sessions,
    batch_id: str,
    config: BatchConfig,
    source: str,
    n_items: int = 0,
    n_cells: int | None = None,
    items_digest: str | None = None,
) -> None:
    """Record a batch being submitted; with `n_items` (known from validation), its totals.
    `n_cells`: the sum of each item's dimensions (default: every item on the batch's)."""
    if n_cells is None:
        n_cells = n_items * len(config.default_dimensions)
    if _exists(sessions, batch_id):
        raise BatchExistsError(batch_id)
    with write_transaction(sessions) as session:
        session.add(
            BatchRow(
                id=batch_id,
                name=config.name,
                config=config.model_dump(mode="json"),
                status=BatchState.SUBMITTING.value,
                source=source,
                items_digest=items_digest,
                n_items=n_items,
                n_cells=n_cells,
                n_samples_expected=n_cells * config.samples_per_cell,
            )
        )


def _exists(sessions: Sessions, batch_id: str) -> bool:
    with sessions() as session:
        return session.get(BatchRow, batch_id) is not None


def record_published(sessions: Sessions, batch_id: str, n_items: int) -> None:
    """The first `n_items` items of the batch have all their tasks queued."""
    with write_transaction(sessions) as session:
        session.execute(
            update(BatchRow).where(BatchRow.id == batch_id).values(n_items_published=n_items)
        )


def add_items(sessions: Sessions, batch_id: str, items: Iterable[tuple[int, Item]]) -> int:
    """Record items (position, item); re-adding the same ids changes nothing."""
    rows = [
        {
            "batch_id": batch_id,
            "item_id": item.id,
            "position": position,
            "payload": item.model_dump(mode="json", exclude_defaults=True),
        }
        for position, item in items
    ]
    with write_transaction(sessions) as session:
        return insert_ignoring_duplicates(session, ItemRow, rows)


def start_batch(
    sessions: Sessions,
    batch_id: str,
    n_items: int,
    n_dimensions: int = 0,
    n_cells: int | None = None,
) -> None:
    """Submission done: fix the totals that progress is measured against: `n_cells`, the sum
    over items of the dimensions each is judged on (default: n_items × n_dimensions)."""
    with write_transaction(sessions) as session:
        row = batch_row(session, batch_id, lock=True)
        config = BatchConfig.model_validate(row.config)
        row.n_items = n_items
        row.n_cells = n_items * n_dimensions if n_cells is None else n_cells
        row.n_samples_expected = row.n_cells * config.samples_per_cell
        if row.status == BatchState.SUBMITTING.value:
            row.status = BatchState.RUNNING.value
        # A batch whose verdicts all arrived while it was still being submitted is done now.
        if row.n_verdicts >= row.n_cells and row.status == BatchState.RUNNING.value:
            row.status = BatchState.COMPLETED.value
            row.finished_at = utcnow()
            session.flush()
            settle_outcome(session, batch_id)  # completed, degraded or failed, by its counts


def set_batch_state(
    sessions: Sessions, batch_id: str, state: BatchState, error: str | None = None
) -> None:
    with write_transaction(sessions) as session:
        row = batch_row(session, batch_id, lock=True)
        row.status = state.value
        row.error = error
        if state.finished:
            row.finished_at = utcnow()


def batch_row(session: Session, batch_id: str, lock: bool = False) -> BatchRow:
    # `lock` (FOR UPDATE on PostgreSQL) orders this read after concurrent verdict counters.
    row = session.get(BatchRow, batch_id, with_for_update=lock)
    if row is None:
        raise UnknownBatchError(f"no batch {batch_id!r} in this database")
    return row


def load_config(sessions: Sessions, batch_id: str) -> BatchConfig:
    with sessions() as session:
        return BatchConfig.model_validate(batch_row(session, batch_id).config)


def batch_source(sessions: Sessions, batch_id: str) -> tuple[str, str | None]:
    """The path of the batch file it was submitted from, and the digest of its items then."""
    with sessions() as session:
        row = batch_row(session, batch_id)
        return row.source, row.items_digest


def load_item(sessions: Sessions, batch_id: str, item_id: str) -> Item:
    return load_item_at(sessions, batch_id, item_id)[0]


def load_item_at(sessions: Sessions, batch_id: str, item_id: str) -> tuple[Item, int]:
    """The item, and its position in the batch."""
    with sessions() as session:
        row = session.get(ItemRow, (batch_id, item_id))
        if row is None:
            raise _no_item(batch_id, item_id)
        return Item.model_validate(row.payload), row.position


def load_items_at(
    sessions: Sessions, batch_id: str, item_ids: list[str]
) -> dict[str, tuple[Item, int]]:
    """These items of the batch, and their positions, in one query; an id the batch lacks is
    left out (load_item_at says so)."""
    with sessions() as session:
        rows = session.execute(
            select(ItemRow.item_id, ItemRow.payload, ItemRow.position).where(
                ItemRow.batch_id == batch_id, ItemRow.item_id.in_(item_ids)
            )
        )
        return {item_id: (Item.model_validate(payload), pos) for item_id, payload, pos in rows}


def item_positions(sessions: Sessions, batch_id: str, item_ids: list[str]) -> dict[str, int]:
    """The positions of these items in the batch, in one query."""
    with sessions() as session:
        rows = session.execute(
            select(ItemRow.item_id, ItemRow.position).where(
                ItemRow.batch_id == batch_id, ItemRow.item_id.in_(item_ids)
            )
        )
        positions = {item_id: position for item_id, position in rows}
    for item_id in item_ids:
        if item_id not in positions:
            raise _no_item(batch_id, item_id)
    return positions


def _no_item(batch_id: str, item_id: str) -> UnknownBatchError:
    return UnknownBatchError(f"no item {item_id!r} in batch {batch_id!r}")


def batch_status(sessions: Sessions, batch_id: str) -> BatchStatus:
    with sessions() as session:
        row = batch_row(session, batch_id)
        return BatchStatus(
            batch_id=row.id,
            name=row.name,
            status=BatchState(row.status),
            n_items=row.n_items,
            n_cells=row.n_cells,
            n_samples_expected=row.n_samples_expected,
            n_items_published=row.n_items_published,
            adaptive=bool(row.config.get("adaptive")),
            n_escalated=_count_escalated(session, batch_id) if row.config.get("adaptive") else 0,
            n_verdicts=row.n_verdicts,
            n_samples=row.n_samples,
            n_failed_samples=row.n_failed_samples,
            n_flagged=row.n_flagged,
            cost_usd=row.cost_usd,
            error=row.error,
            created_at=row.created_at,
            finished_at=row.finished_at,
        )


def batch_state(sessions: Sessions, batch_id: str) -> BatchState:
    with sessions() as session:
        state = session.scalar(select(BatchRow.status).where(BatchRow.id == batch_id))
    if state is None:
        raise UnknownBatchError(f"no batch {batch_id!r} in this database")
    return BatchState(state)


def running_batches(sessions: Sessions, submitting: bool = True) -> list[str]:
    """Batches whose cells are being judged: running, and (unless not `submitting`) those
    still being submitted."""
    active = [BatchState.RUNNING.value] + ([BatchState.SUBMITTING.value] if submitting else [])
    with sessions() as session:
        return list(session.scalars(select(BatchRow.id).where(BatchRow.status.in_(active))))


def _iter_item_column(
    sessions: Sessions, batch_id: str, column: Any, chunk: int
) -> Iterator[list[Any]]:
    """One column of the batch's item rows in submission order, a chunk at a time."""
    last = -1
    while True:
        with sessions() as session:
            rows = list(
                session.execute(
                    select(ItemRow.position, column)
                    .where(ItemRow.batch_id == batch_id, ItemRow.position > last)
                    .order_by(ItemRow.position)
                    .limit(chunk)
                )
            )
        if not rows:
            return
        yield [value for _, value in rows]
        last = rows[-1][0]


def iter_item_ids(sessions: Sessions, batch_id: str, chunk: int = 500) -> Iterator[list[str]]:
    """The batch's item ids in submission order, a chunk at a time."""
    yield from _iter_item_column(sessions, batch_id, ItemRow.item_id, chunk)


def iter_items(
    sessions: Sessions,
    batch_id: str,
    chunk: int = 500,
    keep: Callable[[str], bool] | None = None,
) -> Iterator[list[Item]]:
    """The batch's items in submission order, a chunk at a time; with `keep`, only the items
    whose id it keeps (read before validating: an item whose outputs candidates have not
    written yet is not a valid item)."""
    for payloads in _iter_item_column(sessions, batch_id, ItemRow.payload, chunk):
        yield [
            Item.model_validate(payload)
            for payload in payloads
            if keep is None or keep(str(payload["id"]))
        ]


def reopen_batch(sessions: Sessions, batch_id: str) -> None:
    """Back to running (after `jury resume`), whatever state it ended in."""
    with write_transaction(sessions) as session:
        row = batch_row(session, batch_id, lock=True)
        row.status = BatchState.RUNNING.value
        row.error = None
        row.finished_at = None


def stop_running_batch(sessions: Sessions, batch_id: str, reason: str) -> bool:
    """RUNNING or SUBMITTING → STOPPED (budget reached); False if it was neither."""
    active = (BatchState.RUNNING.value, BatchState.SUBMITTING.value)
    with write_transaction(sessions) as session:
        result = session.execute(
            update(BatchRow)
            .where(BatchRow.id == batch_id, BatchRow.status.in_(active))
            .values(status=BatchState.STOPPED.value, error=reason, finished_at=utcnow())
            .returning(BatchRow.id)
        )
        return result.first() is not None


def set_max_cost(sessions: Sessions, batch_id: str, max_cost_usd: float) -> None:
    with write_transaction(sessions) as session:
        row = batch_row(session, batch_id, lock=True)
        row.config = {**row.config, "max_cost_usd": max_cost_usd}


def _count_escalated(session: Session, batch_id: str) -> int:
    found = session.scalar(
        select(func.count()).select_from(EscalationRow).where(EscalationRow.batch_id == batch_id)
    )
    return int(found or 0)
