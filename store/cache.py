"""The result cache's table: judges' parsed answers, keyed by a hash of the exact call.

The key is computed by the worker (worker.cache); this module only reads and writes rows.
Writes insert-ignoring-duplicates like every other table: two workers making the same call
at once both try to store it, the first wins, and either answer would have done.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from store.engine import write_transaction
from store.models import CachedAnswerRow
from store.sql import Sessions, insert_ignoring_duplicates


@dataclass(frozen=True)
class CachedAnswer:
    """What a judge answered to one call: the parsed score and what the call used."""

    score: float
    reasoning: str | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float


def find_cached_answer(sessions: Sessions, key: str) -> CachedAnswer | None:
    with sessions() as session:
        row = session.get(CachedAnswerRow, key)
        if row is None:
            return None
        return CachedAnswer(
            score=row.score,
            reasoning=row.reasoning,
            prompt_tokens=row.prompt_tokens,
            completion_tokens=row.completion_tokens,
            cost_usd=row.cost_usd,
        )


@dataclass(frozen=True)
class CacheEntry:
    """An answer to keep, and under which key."""

    key: str
    model: str
    answer: CachedAnswer

    def row(self) -> dict[str, object]:
        return {
            "key": self.key,
            "model": self.model,
            "score": self.answer.score,
            "reasoning": self.answer.reasoning,
            "prompt_tokens": self.answer.prompt_tokens,
            "completion_tokens": self.answer.completion_tokens,
            "cost_usd": self.answer.cost_usd,
        }


def keep_cached_answer(session: Session, entry: CacheEntry) -> bool:
    """Within the caller's transaction; False if the key already held an answer."""
    return bool(insert_ignoring_duplicates(session, CachedAnswerRow, [entry.row()]))


def store_cached_answer(sessions: Sessions, key: str, model: str, answer: CachedAnswer) -> bool:
    """Keep an answer under its key; returns False if the key already held one."""
    with write_transaction(sessions) as session:
        return keep_cached_answer(session, CacheEntry(key, model, answer))


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
