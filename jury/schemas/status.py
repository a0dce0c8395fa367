"""A batch's state as `jury status` reports it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel


class BatchState(StrEnum):
    SUBMITTING = "submitting"
    RUNNING = "running"
    COMPLETED = "completed"
    # Finished, but some judge (or some verdict) failed: see schemas.outcome.
    DEGRADED = "degraded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    STOPPED = "stopped"  # its budget (max_cost_usd) was reached

    @property
    def finished(self) -> bool:
        return self in (
            BatchState.COMPLETED,
            BatchState.DEGRADED,
            BatchState.FAILED,
            BatchState.CANCELLED,
            BatchState.STOPPED,
        )

    @property
    def judged(self) -> bool:
        """Every cell has its verdict (the batch ran to its end, well or not)."""
        return self in (BatchState.COMPLETED, BatchState.DEGRADED, BatchState.FAILED)

    @property
    def skips_work(self) -> bool:
        """Workers drop the batch's queued tasks instead of calling judges."""
        return self in (BatchState.CANCELLED, BatchState.STOPPED)


class BatchStatus(BaseModel):
    batch_id: str
    name: str
    status: BatchState
    n_items: int
    n_cells: int
    n_samples_expected: int
    n_items_published: int = 0
    # Adaptive batches: how many cells were escalated past their first round.
    adaptive: bool = False
    n_escalated: int = 0
    n_verdicts: int
    n_samples: int
    n_failed_samples: int
    n_flagged: int
    cost_usd: float
    error: str | None
    created_at: datetime
    finished_at: datetime | None

    @property
    def progress(self) -> float:
        return self.n_verdicts / self.n_cells if self.n_cells else 1.0


@dataclass(frozen=True)
class StoredSamples:
    """A batch's samples stored so far, failed ones included, in finished cells or not."""

    stored: int
    failed: int
    cost_usd: float
    cached: int = 0  # answered from the result cache: no judge call made, nothing spent
