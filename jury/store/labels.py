"""People's labels of a batch's items, read without their texts.

Labels travel inside the stored item (its `labels` and `label` fields); only those two JSON
fields are selected, a chunk of items at a time in submission order, so reading the labels of
a batch of long documents does not read the documents.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from jury.schemas.batch import Item
from jury.store.models import ItemRow
from jury.store.repository import batch_row
from jury.store.sql import Sessions

CHUNK = 2000


def _item(item_id: str, labels: Any, label: Any) -> Item | None:
    if not labels and label is None:
        return None
    # output "" only satisfies the schema; nothing but the labels is read from it
    return Item.model_validate(
        {"id": item_id, "output": "", "labels": labels or {}, "label": label}
    )


def item_labels(sessions: Sessions, batch_id: str) -> dict[str, Item]:
    """The labelled items of the batch (an Item holding only its id and labels), by id."""
    found: dict[str, Item] = {}
    last = -1
    with sessions() as session:
        batch_row(session, batch_id)
        while True:
            rows = list(
                session.execute(
                    select(
                        ItemRow.position,
                        ItemRow.item_id,
                        ItemRow.payload["labels"],
                        ItemRow.payload["label"],
                    )
                    .where(ItemRow.batch_id == batch_id, ItemRow.position > last)
                    .order_by(ItemRow.position)
                    .limit(CHUNK)
                )
            )
            if not rows:
                return found
            for _, item_id, labels, label in rows:
                item = _item(item_id, labels, label)
                if item is not None:
                    found[item_id] = item
            last = rows[-1][0]
