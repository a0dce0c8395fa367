"""What one judge task asks: the call spec, a value derived from the batch, never a code path.

Every judge task is one (item, dimension, judge, sample) reference and runs one sequence (see
`jury.worker.pipeline`). What differs between the batch modes is only this spec:

- which dimensions one call scores: the task's own dimension (`per_dimension`), or every
  dimension of the batch (`combined`: the task is named by the first of them, and stores a
  sample in each of their cells);
- in which presentation orders a pair of outputs is shown: none for a single output; A first
  then B first for a pairwise batch (`orders: both`, the default), or A first only
  (`orders: single`), when cost matters more than position bias.

Pure functions of the batch config: the producer plans and publishes with them, the worker
judges with them, `jury resume` and the sweeper know which tasks a missing sample needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

from jury.schemas.batch import BatchConfig
from jury.schemas.tasks import SampleRef

# Which output of a pair is shown first.
Order = Literal["AB", "BA"]


@dataclass(frozen=True)
class CallSpec:
    """The dimensions one judge call scores and the orders in which its pair is shown."""

    dimensions: tuple[str, ...]
    # (None,): one output; ("AB", "BA"): a pair in both orders, one call each; ("AB",): once.
    orders: tuple[Order | None, ...] = (None,)

    @property
    def paired(self) -> bool:
        return self.orders != (None,)

    @property
    def calls(self) -> int:
        """Judge calls one task makes when nothing fails."""
        return len(self.orders)


def call_spec(config: BatchConfig, dimension: str) -> CallSpec:
    """The spec of the task named by `dimension` in this batch."""
    if config.mode == "combined":
        dimensions = tuple(d.name for d in config.dimensions)
    else:
        dimensions = (dimension,)
    if config.pairwise is None:
        return CallSpec(dimensions)
    orders: tuple[Order, ...] = ("AB", "BA") if config.pairwise.orders == "both" else ("AB",)
    return CallSpec(dimensions, orders)


def task_dimension(config: BatchConfig, dimension: str) -> str:
    """The dimension that names the task which scores `dimension`'s cell."""
    return config.dimensions[0].name if config.mode == "combined" else dimension


def task_refs(config: BatchConfig, samples: Iterable[SampleRef]) -> Iterator[SampleRef]:
    """The tasks that judge these samples, each once (a combined task covers every dimension
    of its item, judge and sample). Refs of one item must arrive in one call, as submission,
    resume and escalation waves do."""
    if config.mode != "combined":
        yield from samples
        return
    seen: set[SampleRef] = set()
    for ref in samples:
        task = ref._replace(dimension=task_dimension(config, ref.dimension))
        if task not in seen:
            seen.add(task)
            yield task


def calls_per_task(config: BatchConfig) -> int:
    """Judge calls one task makes when nothing fails."""
    return call_spec(config, config.dimensions[0].name).calls
