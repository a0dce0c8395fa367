"""What judging produces: one sample per call, one aggregate per judge, one verdict per cell.

The verdict's JSON form is the result record of docs/results.md; scripts depend on its shape.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from jury.schemas.calibration import CalibratedScores
from jury.schemas.judge_prompts import PassVote
from jury.schemas.pairwise import PairJudgment, PairwiseOutcome, Winner

# Stored text is capped: a judge's reasoning is useful for review, not worth megabytes.
MAX_REASONING_CHARS = 1000


class Level(StrEnum):
    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    PARTIAL = "PARTIAL"
    LOW = "LOW"


class SampleResult(BaseModel):
    """The outcome of one (item, dimension, judge, sample) cell: a score or an error."""

    model_config = ConfigDict(extra="forbid")

    judge: str
    sample: int = Field(ge=0)
    score: float | None = None
    error: str | None = None
    error_kind: str | None = None
    reasoning: str | None = None
    # With `pass_vote`: the judge's own pass (True) or fail (False); None when not asked, or
    # when it answered no usable vote.
    vote: bool | None = None
    attempts: int = 1
    latency_ms: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    # Taken from the result cache (worker.cache): no judge call was made, nothing was spent.
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.score is not None


class CellSample(BaseModel):
    """One stored sample with the cell it belongs to, and its pair scores in a pairwise batch:
    what a judge task stores, and what its retry carries when the store refused it."""

    model_config = ConfigDict(extra="forbid")

    dimension: str
    result: SampleResult
    pair: PairJudgment | None = None


class JudgeEvaluation(BaseModel):
    """One judge's N samples of one cell, aggregated within the model."""

    samples: list[float]
    aggregated_score: float | None
    within_model_std: float | None
    n_failed: int = 0


class ConsensusMetrics(BaseModel):
    final_score: float | None
    cross_model_std: float | None
    consensus_level: Level | None
    confidence: Level
    flag_for_review: bool


class Verdict(BaseModel):
    """The result record of one (item, dimension)."""

    item_id: str
    criterion_id: str
    llm_evaluations: dict[str, JudgeEvaluation]
    consensus_metrics: ConsensusMetrics
    passed: bool | None
    threshold: float
    error: str | None = None
    flag_reasons: list[str] = Field(default_factory=list)
    # Pairwise batches only: who won, and how much the judgments agree (schemas.pairwise).
    pairwise: PairwiseOutcome | None = None
    # Added when records are read, never stored with them: people's label of the item on this
    # dimension, and with a `calibration:` file, the calibrated scores (schemas.calibration).
    human_label: float | Winner | None = None
    calibrated: CalibratedScores | None = None
    # With `aggregation.also_across_models`: the panel's score by each method, side by side
    # (the main method first: its value is final_score). Added when records are read.
    aggregations: dict[str, float | None] | None = None
    # False when read from a batch with `report_uncertainty: false` (the plan's switch): the
    # record is written without its uncertainty (UNCERTAINTY_FIELDS), which is still stored
    # and still decides flags, adaptive sampling and the agreement figures.
    uncertainty_shown: bool = Field(default=True, exclude=True)
    # With `pass_vote: true`: the share of samples whose judge said pass (the plan's test_pass).
    pass_vote: PassVote | None = None

    @model_serializer(mode="wrap")
    def _without_absent_parts(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Records of ordinary batches keep exactly the shape scripts already read.
        data: dict[str, Any] = handler(self)
        for optional in ("pairwise", "human_label", "calibrated", "aggregations", "pass_vote"):
            if data.get(optional) is None:
                data.pop(optional, None)
        if not self.uncertainty_shown:
            for name in UNCERTAINTY_FIELDS:
                data.get("consensus_metrics", {}).pop(name, None)
            for evaluation in data.get("llm_evaluations", {}).values():
                evaluation.pop("within_model_std", None)
        return data


# What `report_uncertainty` shows or leaves out of a record: the plan's uncertainty metrics
# (each judge's within_model_std beside these).
UNCERTAINTY_FIELDS = ("cross_model_std", "consensus_level", "confidence")
