"""Which cells of an adaptive batch were escalated (schemas.adaptive): one row per cell."""

from __future__ import annotations

from sqlalchemy import func, select

from jury.schemas.tasks import CellRef
from jury.store.engine import write_transaction
from jury.store.models import EscalationRow
from jury.store.sql import Sessions, insert_ignoring_duplicates


def mark_escalated(sessions: Sessions, cell: CellRef) -> bool:
    """Record the escalation; True only for the caller that recorded it first."""
    row = {"batch_id": cell.batch_id, "item_id": cell.item_id, "dimension": cell.dimension}
    with write_transaction(sessions) as session:
        return insert_ignoring_duplicates(session, EscalationRow, [row]) == 1


def is_escalated(sessions: Sessions, cell: CellRef) -> bool:
    with sessions() as session:
        found = session.scalar(
            select(EscalationRow.id).where(
                EscalationRow.batch_id == cell.batch_id,
                EscalationRow.item_id == cell.item_id,
                EscalationRow.dimension == cell.dimension,
            )
        )
    return found is not None


def escalated_cells(sessions: Sessions, batch_id: str, item_ids: list[str]) -> set[tuple[str, str]]:
    """(item, dimension) of the escalated cells among these items."""
    with sessions() as session:
        rows = session.execute(
            select(EscalationRow.item_id, EscalationRow.dimension).where(
                EscalationRow.batch_id == batch_id, EscalationRow.item_id.in_(item_ids)
            )
        )
        return {(item_id, dimension) for item_id, dimension in rows}


def count_escalated(sessions: Sessions, batch_id: str) -> int:
    with sessions() as session:
        return int(
            session.scalar(
                select(func.count())
                .select_from(EscalationRow)
                .where(EscalationRow.batch_id == batch_id)
            )
            or 0
        )
