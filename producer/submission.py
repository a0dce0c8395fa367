"""Submitting a validated batch: record it and its items, then publish its cells."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from datetime import UTC, datetime
from itertools import islice

from celery import Celery
from sqlalchemy.orm import Session, sessionmaker

from producer.loading import BatchSource
from producer.publishing import publish_cells
from schemas.batch import Item
from schemas.errors import JuryError
from schemas.status import BatchState
from store.repository import add_items, create_batch, set_batch_state, start_batch

ITEM_CHUNK = 500


def new_batch_id() -> str:
    return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def _chunks(items: Iterator[Item], size: int) -> Iterator[list[Item]]:
    while chunk := list(islice(items, size)):
        yield chunk


def submit_batch(
    source: BatchSource,
    sessions: sessionmaker[Session],
    app: Celery,
    batch_id: str | None = None,
) -> str:
    """Record the batch and publish every cell; returns the batch id."""
    batch_id = batch_id or new_batch_id()
    create_batch(sessions, batch_id, source.config, str(source.path))
    position = 0
    try:
        for chunk in _chunks(source.items(), ITEM_CHUNK):
            add_items(sessions, batch_id, enumerate(chunk, start=position))
            position += len(chunk)
            publish_cells(app, batch_id, source.config, [item.id for item in chunk])
        start_batch(sessions, batch_id, position, len(source.config.dimensions))
    except Exception as exc:
        set_batch_state(
            sessions,
            batch_id,
            BatchState.FAILED,
            error=f"submission stopped after {position} items: {type(exc).__name__}: {exc}",
        )
        if isinstance(exc, JuryError):
            raise
        raise JuryError(
            f"submission of batch {batch_id} stopped after {position} items: {exc}"
        ) from exc
    return batch_id
