"""What a batch still lacks: the samples with no stored result (or a stored failure).

Shared by `jury resume` (producer) and the workers' lost-task watch (worker.watchdog).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from jury.schemas.adaptive import first_round, samples_of
from jury.schemas.batch import BatchConfig
from jury.schemas.candidates import source_item_id
from jury.schemas.item_dimensions import item_dimension_names
from jury.store.escalations import escalated_cells
from jury.store.generations import generated_item_ids
from jury.store.repository import iter_item_ids, iter_items
from jury.store.samples import stored_sample_keys
from jury.store.sql import Sessions

Samples = dict[tuple[str, str], list[tuple[str, int]]]  # (item, dimension) -> (judge, sample)


def missing_samples(
    sessions: Sessions, batch_id: str, config: BatchConfig, missing_only: bool
) -> tuple[Samples, Samples]:
    """(to judge, of those the stored failures): samples with no stored result, and unless
    `missing_only` those stored as failures. An adaptive cell expects its first round, or
    every sample once it was escalated."""
    everything, first = samples_of(config.panel), first_round(config)
    cells: Samples = {}
    failed: Samples = {}
    for chunk in _item_cells(sessions, batch_id, config):
        item_ids = [item_id for item_id, _ in chunk]
        stored = stored_sample_keys(sessions, batch_id, item_ids)
        escalated = escalated_cells(sessions, batch_id, item_ids) if config.adaptive else set()
        for item_id, dimensions in chunk:
            for dimension in dimensions:
                key = (item_id, dimension)
                have = stored.get(key, {})
                expected = everything if key in escalated else first
                redo = [s for s in expected if s not in have or (not missing_only and not have[s])]
                if redo:
                    cells[key] = redo
                    failed[key] = [s for s in redo if s in have]
    return cells, failed


def _item_cells(
    sessions: Sessions, batch_id: str, config: BatchConfig
) -> Iterator[list[tuple[str, tuple[str, ...]]]]:
    """(item id, the dimensions it is judged on), a chunk at a time: the stored items are read
    only when items chose their own criteria (schemas.item_dimensions). In a batch with
    candidates, an item counts once its outputs are written (before, it lacks a generation,
    not samples: store.generations.ungenerated_refs)."""
    keep = _generated_filter(sessions, batch_id, config)

    if not config.per_item_dimensions:
        dimensions = tuple(d.name for d in config.dimensions)
        for item_ids in iter_item_ids(sessions, batch_id):
            yield [(item_id, dimensions) for item_id in item_ids if keep(item_id)]
        return
    for items in iter_items(sessions, batch_id, keep=keep):
        yield [(item.id, item_dimension_names(config, item)) for item in items]


def _generated_filter(
    sessions: Sessions, batch_id: str, config: BatchConfig
) -> Callable[[str], bool]:
    """Which judged items count: all, or in a batch with candidates those whose input has
    all its outputs written."""
    if not config.candidates:
        return lambda item_id: True
    names = [c.name for c in config.candidates]
    generated = generated_item_ids(sessions, batch_id)
    return lambda item_id: source_item_id(item_id, names) in generated
