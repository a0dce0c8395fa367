"""SQLAlchemy tables. Unique keys make every write idempotent: one sample per cell, one
aggregate per (cell, judge), one verdict per (item, dimension)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

ID = 200  # max length of ids and names, as validated by schemas


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    pass


class BatchRow(Base):
    __tablename__ = "jury_batches"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(ID))
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16), index=True)
    source: Mapped[str] = mapped_column(Text, default="")
    # A digest of the items as validated at submit (jury.batchfile.loading.ItemStats): a
    # submission continued later must read the same items. NULL for batches of older jurys.
    items_digest: Mapped[str | None] = mapped_column(String(64), nullable=True)
    n_items: Mapped[int] = mapped_column(Integer, default=0)
    n_cells: Mapped[int] = mapped_column(Integer, default=0)
    n_samples_expected: Mapped[int] = mapped_column(Integer, default=0)
    # Items whose tasks are all queued: where a submission that stopped goes on from.
    n_items_published: Mapped[int] = mapped_column(Integer, default=0)
    # Counters bumped in the same transaction as the verdict they count: progress is exact.
    n_verdicts: Mapped[int] = mapped_column(Integer, default=0)
    n_samples: Mapped[int] = mapped_column(Integer, default=0)
    n_failed_samples: Mapped[int] = mapped_column(Integer, default=0)
    n_flagged: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class ItemRow(Base):
    __tablename__ = "jury_items"

    batch_id: Mapped[str] = mapped_column(
        ForeignKey("jury_batches.id", ondelete="CASCADE"), primary_key=True
    )
    item_id: Mapped[str] = mapped_column(String(ID), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)


class _CellKey:
    """The columns that name a cell (one item on one dimension of a batch)."""

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    batch_id: Mapped[str] = mapped_column(ForeignKey("jury_batches.id", ondelete="CASCADE"))
    item_id: Mapped[str] = mapped_column(String(ID))
    dimension: Mapped[str] = mapped_column(String(ID))


class SampleRow(_CellKey, Base):
    __tablename__ = "jury_samples"
    __table_args__ = (
        UniqueConstraint("batch_id", "item_id", "dimension", "judge", "sample", name="uq_sample"),
    )

    judge: Mapped[str] = mapped_column(String(ID))
    sample: Mapped[int] = mapped_column(Integer)
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    error_kind: Mapped[str | None] = mapped_column(String(64), nullable=True)
    reasoning: Mapped[str | None] = mapped_column(Text, nullable=True)
    vote: Mapped[bool | None] = mapped_column(nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    latency_ms: Mapped[float] = mapped_column(Float, default=0.0)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    # Reused from the result cache: no judge call was made for it (cost_usd is then 0).
    cached: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class CachedAnswerRow(Base):
    """A judge's parsed answer to one exact call, keyed by a hash of everything that shapes
    the call (worker.cache.cache_key); shared by every batch. Only successful answers: the
    samples the call gave (one per dimension it scored, with pair scores when paired)."""

    __tablename__ = "jury_answer_cache"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    # For people looking at the table (and deleting a model's answers): not part of a lookup.
    model: Mapped[str] = mapped_column(String(ID), index=True)
    answer: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    # What the call cost when it was made; a sample reusing it costs nothing.
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class JudgeAggregateRow(_CellKey, Base):
    __tablename__ = "jury_judge_aggregates"
    __table_args__ = (
        UniqueConstraint("batch_id", "item_id", "dimension", "judge", name="uq_judge_aggregate"),
    )

    judge: Mapped[str] = mapped_column(String(ID))
    position: Mapped[int] = mapped_column(Integer)
    samples: Mapped[list[float]] = mapped_column(JSON)
    aggregated_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    within_model_std: Mapped[float | None] = mapped_column(Float, nullable=True)
    n_failed: Mapped[int] = mapped_column(Integer, default=0)


class VerdictRow(_CellKey, Base):
    __tablename__ = "jury_verdicts"
    __table_args__ = (UniqueConstraint("batch_id", "item_id", "dimension", name="uq_verdict"),)

    item_position: Mapped[int] = mapped_column(Integer)
    dimension_position: Mapped[int] = mapped_column(Integer)
    final_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    cross_model_std: Mapped[float | None] = mapped_column(Float, nullable=True)
    consensus_level: Mapped[str | None] = mapped_column(String(16), nullable=True)
    confidence: Mapped[str] = mapped_column(String(16))
    flag_for_review: Mapped[bool] = mapped_column(default=False)
    flag_reasons: Mapped[list[str]] = mapped_column(JSON, default=list)
    passed: Mapped[bool | None] = mapped_column(nullable=True)
    threshold: Mapped[float] = mapped_column(Float)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    # With `pass_vote`: schemas.judge_prompts.PassVote as JSON.
    pass_vote: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class PairJudgmentRow(_CellKey, Base):
    """The four scores behind one pairwise sample (its stored score is the preference for A):
    A's and B's score with A shown first, and with B shown first."""

    __tablename__ = "jury_pair_judgments"
    __table_args__ = (
        UniqueConstraint(
            "batch_id", "item_id", "dimension", "judge", "sample", name="uq_pair_judgment"
        ),
    )

    judge: Mapped[str] = mapped_column(String(ID))
    sample: Mapped[int] = mapped_column(Integer)
    a_first_a: Mapped[float] = mapped_column(Float)
    a_first_b: Mapped[float] = mapped_column(Float)
    # Null when the batch shows each pair once (pairwise `orders: single`).
    b_first_a: Mapped[float | None] = mapped_column(Float, nullable=True)
    b_first_b: Mapped[float | None] = mapped_column(Float, nullable=True)


class PairOutcomeRow(_CellKey, Base):
    """The `pairwise` part of a pairwise verdict, written in the verdict's transaction."""

    __tablename__ = "jury_pair_outcomes"
    __table_args__ = (UniqueConstraint("batch_id", "item_id", "dimension", name="uq_pair_outcome"),)

    outcome: Mapped[dict[str, Any]] = mapped_column(JSON)


class EscalationRow(_CellKey, Base):
    """A cell of an adaptive batch whose first round was uncertain: it gets every sample."""

    __tablename__ = "jury_escalations"
    __table_args__ = (UniqueConstraint("batch_id", "item_id", "dimension", name="uq_escalation"),)

    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ChordCallbackRow(_CellKey, Base):
    """A cell's chord callback (jury.aggregate_cell) was sent for this round: the claim that
    makes it exactly once, when two judge tasks complete the cell at the same moment. Round 0
    is the cell's first (or only) round, round 1 an adaptive cell's escalation."""

    __tablename__ = "jury_chord_callbacks"
    __table_args__ = (
        UniqueConstraint("batch_id", "item_id", "dimension", "round", name="uq_chord_callback"),
    )

    round: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ProviderBatchRow(Base):
    """One batch submitted to a provider's Batch API (docs/batch-api.md). Written, with its
    requests claimed, before anything is sent: the intent a restarted worker finishes."""

    __tablename__ = "jury_provider_batches"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    batch_id: Mapped[str] = mapped_column(ForeignKey("jury_batches.id", ondelete="CASCADE"))
    judge: Mapped[str] = mapped_column(String(ID))
    model: Mapped[str] = mapped_column(String(ID))
    api_base: Mapped[str] = mapped_column(String(1000), default="")
    key_env: Mapped[str] = mapped_column(String(ID), default="")
    state: Mapped[str] = mapped_column(String(16), index=True)
    provider_id: Mapped[str | None] = mapped_column(String(ID), nullable=True)
    provider_status: Mapped[str | None] = mapped_column(String(32), nullable=True)
    n_requests: Mapped[int] = mapped_column(Integer, default=0)
    n_done: Mapped[int] = mapped_column(Integer, default=0)
    n_failed: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    next_poll_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class BatchRequestRow(Base):
    """One call of a batch judge's task, waiting for (or in) a provider batch."""

    __tablename__ = "jury_batch_requests"
    __table_args__ = (UniqueConstraint("custom_id", name="uq_batch_request"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    custom_id: Mapped[str] = mapped_column(String(1100))
    batch_id: Mapped[str] = mapped_column(ForeignKey("jury_batches.id", ondelete="CASCADE"))
    item_id: Mapped[str] = mapped_column(String(ID))
    dimension: Mapped[str] = mapped_column(String(ID))
    judge: Mapped[str] = mapped_column(String(ID))
    sample: Mapped[int] = mapped_column(Integer)
    call: Mapped[int] = mapped_column(Integer, default=0)
    messages: Mapped[list[dict[str, str]]] = mapped_column(JSON)
    state: Mapped[str] = mapped_column(String(16), index=True)
    provider_batch: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class GenerationRow(Base):
    """One candidate's answer to one item's input (schemas.candidates): stored once, under its
    unique key, so a redelivered generation task never generates twice. A failed generation
    stores its error as the answer text, with `error_kind` set."""

    __tablename__ = "jury_generations"
    __table_args__ = (UniqueConstraint("batch_id", "item_id", "candidate", name="uq_generation"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    batch_id: Mapped[str] = mapped_column(ForeignKey("jury_batches.id", ondelete="CASCADE"))
    item_id: Mapped[str] = mapped_column(String(ID))
    candidate: Mapped[str] = mapped_column(String(ID))
    text: Mapped[str] = mapped_column(Text)
    error_kind: Mapped[str | None] = mapped_column(String(64), nullable=True)
    latency_ms: Mapped[float] = mapped_column(Float, default=0.0)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class GeneratedItemRow(Base):
    """Every candidate of the item has answered: its outputs were written into the item and
    its judge tasks queued, by whoever inserted this row first (exactly once)."""

    __tablename__ = "jury_generated_items"

    batch_id: Mapped[str] = mapped_column(
        ForeignKey("jury_batches.id", ondelete="CASCADE"), primary_key=True
    )
    item_id: Mapped[str] = mapped_column(String(ID), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
