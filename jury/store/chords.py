"""The chord's barrier claim: a cell's callback is sent once per round, by whoever claims it.

jury's chord is its own, not Celery's: Celery's Redis chord counts finished header messages,
so a task delivered twice fires the callback early (with one sample missing and another
counted twice). Here the barrier counts distinct stored samples (jury.store.samples), and the
judge task that finds its cell complete claims the callback with a unique row: of two tasks
completing a cell at the same moment, exactly one sends it.
"""

from __future__ import annotations

from jury.schemas.tasks import CellRef
from jury.store.engine import core_transaction
from jury.store.models import ChordCallbackRow
from jury.store.sql import Sessions, inserted_rows


def claim_callbacks(sessions: Sessions, cells: list[tuple[CellRef, int]]) -> list[CellRef]:
    """Claim the callbacks of these (cell, round)s; returns the cells this caller claimed."""
    rows = [
        {"batch_id": c.batch_id, "item_id": c.item_id, "dimension": c.dimension, "round": r}
        for c, r in cells
    ]
    columns = (ChordCallbackRow.batch_id, ChordCallbackRow.item_id, ChordCallbackRow.dimension)
    with core_transaction(sessions) as connection:
        claimed = inserted_rows(connection, ChordCallbackRow, rows, *columns)
    return [CellRef(*row) for row in claimed]
