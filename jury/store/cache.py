"""The result cache's table: judges' parsed answers, keyed by a hash of the exact call.

The key is computed by the worker (worker.cache); this module only reads and writes rows.
Writes insert-ignoring-duplicates like every other table: two workers making the same call
at once both try to store it, the first wins, and either answer would have done.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from jury.schemas.results import CellSample
from jury.store.engine import core_transaction, write_transaction
from jury.store.models import CachedAnswerRow
from jury.store.sql import Sessions, insert_ignoring_duplicates


def find_cached_answer(sessions: Sessions, key: str) -> list[CellSample] | None:
    """The samples a call gave when it was made, or None if it never was."""
    return find_cached_answers(sessions, [key]).get(key)


def has_answers(sessions: Sessions, model: str) -> bool:
    """Whether any answer of this model is kept (an index lookup)."""
    with core_transaction(sessions, write=False) as connection:
        query = select(CachedAnswerRow.key).where(CachedAnswerRow.model == model).limit(1)
        return connection.execute(query).first() is not None


def find_cached_answers(sessions: Sessions, keys: list[str]) -> dict[str, list[CellSample]]:
    """The cached answers among these keys, in one query."""
    if not keys:
        return {}
    with core_transaction(sessions, write=False) as connection:
        rows = connection.execute(
            select(CachedAnswerRow.key, CachedAnswerRow.answer).where(CachedAnswerRow.key.in_(keys))
        )
        return {key: [CellSample.model_validate(s) for s in answer] for key, answer in rows}


@dataclass(frozen=True)
class CacheEntry:
    """An answer to keep (the samples one call gave), and under which key."""

    key: str
    model: str
    samples: tuple[CellSample, ...]

    def row(self) -> dict[str, object]:
        return {
            "key": self.key,
            "model": self.model,
            "answer": [s.model_dump(mode="json") for s in self.samples],
            "cost_usd": sum(s.result.cost_usd for s in self.samples),
        }


def keep_cached_answer(session: Session, entry: CacheEntry) -> bool:
    """Within the caller's transaction; False if the key already held an answer."""
    return bool(insert_ignoring_duplicates(session, CachedAnswerRow, [entry.row()]))


def store_cached_answer(sessions: Sessions, entry: CacheEntry) -> bool:
    """Keep an answer under its key; returns False if the key already held one."""
    with write_transaction(sessions) as session:
        return keep_cached_answer(session, entry)


def forget_cached_answers(sessions: Sessions, model: str | None = None) -> int:
    """Delete the cached answers of one model (its LiteLLM string), or all; returns how many."""
    statement = delete(CachedAnswerRow)
    if model is not None:
        statement = statement.where(CachedAnswerRow.model == model)
    with write_transaction(sessions) as session:
        return len(session.execute(statement.returning(CachedAnswerRow.key)).all())


def count_cached_answers(sessions: Sessions, model: str | None = None) -> int:
    query = select(func.count()).select_from(CachedAnswerRow)
    if model is not None:
        query = query.where(CachedAnswerRow.model == model)
    with sessions() as session:
        return session.scalar(query) or 0
