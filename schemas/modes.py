"""Which judge tasks a batch's samples become, by the batch's mode.

per_dimension (the default) and pairwise: one task per (item, dimension, judge, sample), as
planned. combined: one task per (item, judge, sample), whose dimension is the reserved
ALL_DIMENSIONS marker; the worker's one call scores every dimension and stores a sample in
each cell. Refs of one item must arrive in one call, as submission and resume waves do.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from schemas.batch import BatchConfig
from schemas.tasks import ALL_DIMENSIONS, SampleRef


def task_refs(config: BatchConfig, samples: Iterable[SampleRef]) -> Iterator[SampleRef]:
    """The tasks that judge these samples, each once."""
    if config.mode != "combined":
        yield from samples
        return
    seen: set[SampleRef] = set()
    for ref in samples:
        task = ref._replace(dimension=ALL_DIMENSIONS)
        if task not in seen:
            seen.add(task)
            yield task


def calls_per_task(config: BatchConfig) -> int:
    """Judge calls one task makes when nothing fails: two orders for a pairwise sample."""
    return 2 if config.pairwise is not None else 1
