"""Provider batches and their requests in SQL (docs/batch-api.md): idempotent functions.

A batch judge's task stores its calls as requests (unique `custom_id`: a task delivered twice
stores them once). A submitter claims pending requests into a new provider batch row in one
transaction *before* it sends anything: that row is the intent a restarted worker finishes
(looking the provider's batch up by its metadata before it would submit again). A request
leaves its provider batch only by being stored as a sample (`done`) or sent back to `pending`
for the next provider batch, each conditioned on still belonging to that batch, so a second
poller, or a poller killed and run again, changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import CursorResult, func, select, update

from jury.schemas.provider_batches import (
    DONE,
    ENDED,
    OPEN,
    PENDING,
    SENT,
    STORED,
    SUBMITTING,
    UNFINISHED,
    ProviderBatchInfo,
)
from jury.store.engine import core_transaction
from jury.store.models import BatchRequestRow, ProviderBatchRow
from jury.store.sql import Sessions, insert_ignoring_duplicates


@dataclass(frozen=True)
class Request:
    id: int
    custom_id: str
    batch_id: str
    item_id: str
    dimension: str
    judge: str
    sample: int
    call: int
    messages: list[dict[str, str]]
    attempts: int


@dataclass(frozen=True)
class ProviderBatch:
    id: str
    batch_id: str
    judge: str
    state: str
    provider_id: str | None
    provider_status: str | None
    n_requests: int
    created_at: datetime


def _request(row: BatchRequestRow) -> Request:
    return Request(
        row.id,
        row.custom_id,
        row.batch_id,
        row.item_id,
        row.dimension,
        row.judge,
        row.sample,
        row.call,
        list(row.messages),
        row.attempts,
    )


def _batch(row: ProviderBatchRow) -> ProviderBatch:
    return ProviderBatch(
        row.id,
        row.batch_id,
        row.judge,
        row.state,
        row.provider_id,
        row.provider_status,
        row.n_requests,
        row.created_at,
    )


def record_requests(sessions: Sessions, rows: Sequence[dict[str, Any]]) -> int:
    """Store a task's calls as pending requests; returns how many were new or asked again.

    A request already waiting or in a provider batch is left alone (a duplicate delivery);
    one already `done` is asked again (`jury resume` re-queued its task: its sample is missing
    or failed)."""
    full = [{**r, "state": PENDING, "attempts": r.get("attempts", 0)} for r in rows]
    with core_transaction(sessions) as connection:
        new = insert_ignoring_duplicates(connection, BatchRequestRow, full)
        again = _count(
            connection.execute(
                update(BatchRequestRow)
                .where(
                    BatchRequestRow.custom_id.in_([r["custom_id"] for r in rows]),
                    BatchRequestRow.state == DONE,
                )
                .values(
                    state=PENDING, provider_batch=None, attempts=0, created_at=datetime.now(UTC)
                )
            )
        )
        return new + again


def pending_groups(sessions: Sessions) -> list[tuple[str, str, int, datetime]]:
    """(batch, judge, pending requests, when the newest was stored) for each judge waiting."""
    statement = (
        select(
            BatchRequestRow.batch_id,
            BatchRequestRow.judge,
            func.count(),
            func.max(BatchRequestRow.created_at),
        )
        .where(BatchRequestRow.state == PENDING)
        .group_by(BatchRequestRow.batch_id, BatchRequestRow.judge)
    )
    with sessions() as session:
        return [(b, j, int(n), _aware(t)) for b, j, n, t in session.execute(statement).all()]


def claim_requests(
    sessions: Sessions, row: dict[str, Any], limit: int
) -> tuple[ProviderBatch, list[Request]] | None:
    """Store a new provider batch (state `submitting`) and claim up to `limit` of its judge's
    pending requests into it, in one transaction; None if none was pending any more."""
    pending = (
        BatchRequestRow.state == PENDING,
        BatchRequestRow.batch_id == row["batch_id"],
        BatchRequestRow.judge == row["judge"],
    )
    task = (BatchRequestRow.item_id, BatchRequestRow.dimension, BatchRequestRow.sample)
    with sessions.begin() as session:
        found = session.execute(
            select(BatchRequestRow.id, *task)
            .where(*pending)
            .order_by(BatchRequestRow.id)
            .limit(limit)
        ).all()
        if not found:
            return None
        ids = [r[0] for r in found]
        # A task's calls (a pair's two orders) go into one provider batch, never split.
        item_id, dimension, sample = found[-1][1:]
        ids += [
            i
            for i in session.scalars(
                select(BatchRequestRow.id).where(
                    *pending,
                    BatchRequestRow.item_id == item_id,
                    BatchRequestRow.dimension == dimension,
                    BatchRequestRow.sample == sample,
                )
            )
            if i not in ids
        ]
        claimed = _count(
            session.execute(
                update(BatchRequestRow)
                .where(BatchRequestRow.id.in_(ids), BatchRequestRow.state == PENDING)
                .values(state=SENT, provider_batch=row["id"])
            )
        )
        if not claimed:
            return None
        record = ProviderBatchRow(**row, state=SUBMITTING, n_requests=claimed)
        session.add(record)
        session.flush()
        requests = [
            _request(r)
            for r in session.scalars(
                select(BatchRequestRow).where(BatchRequestRow.provider_batch == row["id"])
            )
        ]
        return _batch(record), requests


def requests_of(sessions: Sessions, provider_batch: str) -> list[Request]:
    """The requests still in this provider batch (sent, not yet stored nor sent on)."""
    with sessions() as session:
        rows = session.scalars(
            select(BatchRequestRow)
            .where(BatchRequestRow.provider_batch == provider_batch, BatchRequestRow.state == SENT)
            .order_by(BatchRequestRow.id)
        )
        return [_request(r) for r in rows]


def unfinished_batches(
    sessions: Sessions, states: Sequence[str] = UNFINISHED
) -> list[ProviderBatch]:
    with sessions() as session:
        rows = session.scalars(
            select(ProviderBatchRow)
            .where(ProviderBatchRow.state.in_(states))
            .order_by(ProviderBatchRow.created_at)
        )
        return [_batch(r) for r in rows]


def due_batches(sessions: Sessions, now: datetime) -> list[ProviderBatch]:
    """Provider batches the provider has (open or ended) whose next poll is due."""
    with sessions() as session:
        rows = session.scalars(
            select(ProviderBatchRow).where(
                ProviderBatchRow.state.in_((OPEN, ENDED)), ProviderBatchRow.next_poll_at <= now
            )
        )
        return [_batch(r) for r in rows]


def set_batch(sessions: Sessions, id_: str, **values: Any) -> None:
    with core_transaction(sessions) as connection:
        connection.execute(
            update(ProviderBatchRow).where(ProviderBatchRow.id == id_).values(**values)
        )


def send_back(sessions: Sessions, provider_batch: str, ids: Sequence[int]) -> int:
    """Requests the provider failed go back to pending, for the next provider batch."""
    return _settle_sent(
        sessions,
        provider_batch,
        ids,
        state=PENDING,
        provider_batch=None,
        attempts=BatchRequestRow.attempts + 1,
        created_at=datetime.now(UTC),
    )


def mark_done(sessions: Sessions, provider_batch: str, ids: Sequence[int]) -> int:
    return _settle_sent(sessions, provider_batch, ids, state=DONE)


def _settle_sent(sessions: Sessions, sent_in: str, ids: Sequence[int], **values: Any) -> int:
    """Sets `values` on those of `ids` still sent in provider batch `sent_in`; returns how
    many."""
    if not ids:
        return 0
    with core_transaction(sessions) as connection:
        return _count(
            connection.execute(
                update(BatchRequestRow)
                .where(
                    BatchRequestRow.id.in_(list(ids)),
                    BatchRequestRow.provider_batch == sent_in,
                    BatchRequestRow.state == SENT,
                )
                .values(**values)
            )
        )


def finish_batch(sessions: Sessions, id_: str, done: int, failed: int) -> None:
    set_batch(sessions, id_, state=STORED, n_done=done, n_failed=failed)


def provider_batches(sessions: Sessions, batch_id: str) -> list[ProviderBatchInfo]:
    """Every provider batch of a jury batch, oldest first, for `jury status`."""
    with sessions() as session:
        rows = session.scalars(
            select(ProviderBatchRow)
            .where(ProviderBatchRow.batch_id == batch_id)
            .order_by(ProviderBatchRow.created_at)
        )
        return [
            ProviderBatchInfo(
                r.id,
                r.judge,
                r.model,
                r.state,
                r.provider_id,
                r.provider_status,
                r.n_requests,
                r.n_done,
                r.n_failed,
                _aware(r.created_at),
            )
            for r in rows
        ]


def open_requests(sessions: Sessions, batch_id: str) -> int:
    """Requests of the batch still waiting for, or in, a provider batch."""
    with sessions() as session:
        return int(
            session.scalar(
                select(func.count()).where(
                    BatchRequestRow.batch_id == batch_id,
                    BatchRequestRow.state.in_((PENDING, SENT)),
                )
            )
            or 0
        )


def _count(result: Any) -> int:
    return int(cast(CursorResult[Any], result).rowcount)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


__all__ = ["OPEN", "ProviderBatch", "Request"]
