"""The candidates' answers (schemas.candidates): stored once per (item, candidate), and written
into the item when the last of its candidates has answered.

Exactly once, whatever the deliveries: the answer is stored under its unique key (a
redelivered task finds it and generates nothing), and the item's judging is claimed with a
unique row, in the same transaction that writes its outputs. That transaction first locks the
item's row, so of two candidates answering the same item at once, the second to commit sees
the first's answer and is the one that claims.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sqlalchemy import delete, select

from jury.errors import UnknownBatchError
from jury.schemas.batch import Item
from jury.schemas.candidates import judged_item_ids, outputs_of, source_item_id
from jury.schemas.tasks import GenerationRef
from jury.store.engine import write_transaction
from jury.store.models import GeneratedItemRow, GenerationRow, ItemRow
from jury.store.sql import Sessions, insert_ignoring_duplicates


@dataclass(frozen=True)
class Generation:
    """One candidate's answer: its text, or an error stored as the text (`error_kind`)."""

    candidate: str
    text: str
    error_kind: str | None = None
    latency_ms: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


def item_input(
    sessions: Sessions, batch_id: str, source_item: str, candidates: list[str]
) -> str | None:
    """The input item's `input`, read from the payload of the (first) item judged on its
    answers (which has no output yet)."""
    with sessions() as session:
        for item_id in judged_item_ids(source_item, candidates):
            row = session.get(ItemRow, (batch_id, item_id))
            if row is not None:  # --limit or --sample may have left some pair items out
                value = row.payload.get("input")
                return value if isinstance(value, str) else None
        raise UnknownBatchError(f"no item {source_item!r} in batch {batch_id!r}")


def is_generated(sessions: Sessions, batch_id: str, item_id: str, candidate: str) -> bool:
    with sessions() as session:
        found = session.execute(
            select(GenerationRow.id).where(
                GenerationRow.batch_id == batch_id,
                GenerationRow.item_id == item_id,
                GenerationRow.candidate == candidate,
            )
        ).first()
        return found is not None


def generations(sessions: Sessions, batch_id: str) -> list[tuple[str, Generation]]:
    """Every stored answer of the batch, as (item id, answer), in storing order."""
    with sessions() as session:
        rows = session.scalars(
            select(GenerationRow)
            .where(GenerationRow.batch_id == batch_id)
            .order_by(GenerationRow.id)
        ).all()
        return [
            (
                row.item_id,
                Generation(
                    row.candidate,
                    row.text,
                    row.error_kind,
                    row.latency_ms,
                    row.prompt_tokens,
                    row.completion_tokens,
                    row.cost_usd,
                ),
            )
            for row in rows
        ]


def record_generation(
    sessions: Sessions,
    batch_id: str,
    source_item: str,
    generation: Generation | None,
    candidates: list[str],
) -> list[Item]:
    """Store `generation` (None: stored by an earlier delivery) for the input item
    `source_item`; then, if every candidate has answered it and this caller is the first to
    claim it, write the answers into the items judged on them (schemas.candidates.outputs_of)
    and return those items, whose judge tasks the caller queues. Otherwise, nothing."""
    item_ids = judged_item_ids(source_item, candidates)
    with write_transaction(sessions) as session:
        rows = [session.get(ItemRow, (batch_id, i), with_for_update=True) for i in item_ids]
        # Those submitted: --limit or --sample may have left some of an input's pairs out.
        found = [row for row in rows if row is not None]
        if not found:
            raise UnknownBatchError(f"no item {source_item!r} in batch {batch_id!r}")
        if generation is not None:
            values = {"batch_id": batch_id, "item_id": source_item, **asdict(generation)}
            insert_ignoring_duplicates(session, GenerationRow, [values])
        texts: dict[str, str] = dict(
            session.execute(
                select(GenerationRow.candidate, GenerationRow.text).where(
                    GenerationRow.batch_id == batch_id, GenerationRow.item_id == source_item
                )
            ).all()
        )
        if any(name not in texts for name in candidates):
            return []
        claim = {"batch_id": batch_id, "item_id": source_item}
        if not insert_ignoring_duplicates(session, GeneratedItemRow, [claim]):
            return []  # claimed (and queued) by another delivery
        items = []
        for row in found:
            row.payload = {**row.payload, **outputs_of(row.item_id, candidates, texts)}
            items.append(Item.model_validate(row.payload))
        return items


def release_claim(sessions: Sessions, batch_id: str, item_id: str) -> None:
    """The claimer could not queue the item's judge tasks: let the task's next delivery claim
    (and queue) them instead."""
    with write_transaction(sessions) as session:
        session.execute(
            delete(GeneratedItemRow).where(
                GeneratedItemRow.batch_id == batch_id, GeneratedItemRow.item_id == item_id
            )
        )


def generated_item_ids(sessions: Sessions, batch_id: str) -> set[str]:
    """The input items whose candidates have all answered and whose judging was queued."""
    with sessions() as session:
        return set(
            session.scalars(
                select(GeneratedItemRow.item_id).where(GeneratedItemRow.batch_id == batch_id)
            )
        )


def ungenerated_refs(
    sessions: Sessions, batch_id: str, candidates: list[str]
) -> list[GenerationRef]:
    """The generation tasks of the items whose judging was never queued (a generation task
    was lost, or failed): each of its candidates' (an answer stored already is not asked for
    again; the last one claims the judging)."""
    judged = generated_item_ids(sessions, batch_id)
    with sessions() as session:
        item_ids = session.scalars(
            select(ItemRow.item_id).where(ItemRow.batch_id == batch_id).order_by(ItemRow.position)
        ).all()
    sources = dict.fromkeys(source_item_id(item_id, candidates) for item_id in item_ids)
    return [
        GenerationRef(batch_id, source, name)
        for source in sources
        if source not in judged
        for name in candidates
    ]
