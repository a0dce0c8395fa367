"""What one judge task asks: the call spec, a value derived from the batch, never a code path.

Every judge task is one (item, dimension, judge, sample) reference and runs one sequence (see
`jury.worker.judging.pipeline`). What differs between the batch modes is only this spec:

- which dimensions one call scores: the task's own dimension (`per_dimension`), or every
  dimension its item is judged on (`combined`: the task is named by the first of them in the
  batch's order, and stores a sample in each of their cells; schemas.item_dimensions);
- in which presentation orders a pair of outputs is shown: none for a single output; A first
  then B first for a pairwise batch (`orders: both`, the default), or A first only
  (`orders: single`), when cost matters more than position bias.

Pure functions of the batch config: the producer plans and publishes with them, the worker
judges with them, `jury resume` and the sweeper know which tasks a missing sample needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
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


def call_spec(
    config: BatchConfig, dimension: str, item_dimensions: Sequence[str] | None = None
) -> CallSpec:
    """The spec of the task named by `dimension` in this batch; `item_dimensions`: those its
    item is judged on (default: the batch's)."""
    if config.mode == "combined":
        if item_dimensions is None:
            item_dimensions = [d.name for d in config.default_dimensions]
        dimensions = tuple(item_dimensions)
    else:
        dimensions = (dimension,)
    if config.pairwise is None:
        return CallSpec(dimensions)
    orders: tuple[Order, ...] = ("AB", "BA") if config.pairwise.orders == "both" else ("AB",)
    return CallSpec(dimensions, orders)


def task_dimension(config: BatchConfig, dimension: str) -> str:
    """The dimension that names the task which scores `dimension`'s cell (a batch whose items
    share the batch's dimensions)."""
    return config.dimensions[0].name if config.mode == "combined" else dimension


def task_refs(config: BatchConfig, samples: Iterable[SampleRef]) -> Iterator[SampleRef]:
    """The tasks that judge these samples, each once (a combined task covers every dimension
    of its item, judge and sample). Refs of one item must arrive in one call, as submission,
    resume and escalation waves do. With per-item criteria, a combined task is named by the
    first, in the batch's order, of its item's dimensions among the refs: a combined call
    stores all of its item's cells or none, so its refs come together."""
    if config.mode != "combined":
        yield from samples
        return
    if config.per_item_dimensions:
        yield from _first_per_task(config, samples)
        return
    seen: set[SampleRef] = set()
    for ref in samples:
        task = ref._replace(dimension=task_dimension(config, ref.dimension))
        if task not in seen:
            seen.add(task)
            yield task


def _first_per_task(config: BatchConfig, samples: Iterable[SampleRef]) -> Iterator[SampleRef]:
    position = {d.name: index for index, d in enumerate(config.dimensions)}
    tasks: dict[tuple[str, str, str, int], SampleRef] = {}
    for ref in samples:
        key = (ref.batch_id, ref.item_id, ref.judge, ref.sample)
        held = tasks.get(key)
        if held is None or position[ref.dimension] < position[held.dimension]:
            tasks[key] = ref
    yield from tasks.values()


def calls_per_task(config: BatchConfig) -> int:
    """Judge calls one task makes when nothing fails."""
    return call_spec(config, config.dimensions[0].name).calls
