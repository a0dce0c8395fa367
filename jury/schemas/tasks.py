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
