"""Task payloads as they travel through Redis: references, never copies of item text.

A judge task carries five short fields as positional arguments, so its message stays well under
1 KB whatever the size of the item it refers to; the worker reads the item from the store.
"""

from __future__ import annotations

from typing import NamedTuple

# Task names: the producer sends by name and never imports the worker.
JUDGE_TASK = "jury.judge_sample"
# The chord callback of a cell: within-model, then cross-model aggregation and the verdict.
AGGREGATE_TASK = "jury.aggregate_cell"
# One candidate's answer to one item's input (a batch with `candidates:`), then its judging.
GENERATE_TASK = "jury.generate_output"


class CellRef(NamedTuple):
    """One (item, dimension) of a batch: the unit that gets a verdict."""

    batch_id: str
    item_id: str
    dimension: str


class GenerationRef(NamedTuple):
    """One (item, candidate) of a batch with candidates: the unit that gets a generation."""

    batch_id: str
    item_id: str
    candidate: str


class SampleRef(NamedTuple):
    """One (item, dimension, judge, sample) of a batch: the unit that gets a judge call."""

    batch_id: str
    item_id: str
    dimension: str
    judge: str
    sample: int

    @property
    def cell(self) -> CellRef:
        return CellRef(self.batch_id, self.item_id, self.dimension)


# Redis keys of a submission: how many items are queued (set in the same transaction as
# their tasks) and which producer is submitting.
def submit_cursor_key(batch_id: str) -> str:
    return f"jury:submit:{batch_id}:cursor"


def submit_lock_key(batch_id: str) -> str:
    return f"jury:submit:{batch_id}:lock"


# Which deployment (base queue) a batch's tasks were published to: deployments sharing a
# database see each other's batches, and each looks after its own (worker.watchdog).
def batch_deployment_key(batch_id: str) -> str:
    return f"jury:deployment:{batch_id}"


# The mark outlives the batch's last wave by this long (seconds).
BATCH_DEPLOYMENT_TTL_S = 90 * 86_400


# Redis keys of a batch's budget meter: its cap and what its judge calls have cost so far.
def budget_cap_key(batch_id: str) -> str:
    return f"jury:budget:{batch_id}:cap"


def budget_spent_key(batch_id: str) -> str:
    return f"jury:budget:{batch_id}:spent"
