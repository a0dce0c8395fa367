"""Per-item criteria: which dimensions each item is judged on. Pure.

An item judged on the batch's dimensions names none of its own. An item with `focus_areas`
is judged on those, in its order: each names one of the batch's dimensions, a built-in
criterion (jury.schemas.criteria) or one of the item's own `custom_criteria`; its custom
criteria it does not name are added after them. A built-in or custom criterion that is not
one of the batch's dimensions joins the batch's dimension list when the batch is loaded,
marked `item_only` (judged only where an item names it), so that the stored config holds the
rubric every worker, report and resume reads: one pipeline, whatever the item.

A criterion of an item's own is on the scale the batch's dimensions share (1 to 5 when they
differ) unless it gives one. Two items may define a criterion of the same name only alike.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import ValidationError

from jury.schemas.batch import BatchConfig, Dimension, Scale
from jury.schemas.criteria import builtin_criterion
from jury.schemas.items import Item, ItemCriterion


def item_dimension_names(config: BatchConfig, item: Item) -> tuple[str, ...]:
    """The dimensions this item is judged on, in the order its cells are made; each is one of
    `config.dimensions`. Only a batch loaded with per-item criteria (`per_item_dimensions`)
    lets its items choose (a batch stored before them judged every item on all of them)."""
    if not config.per_item_dimensions:
        return tuple(d.name for d in config.default_dimensions)
    return _chosen(config, item)


def _chosen(config: BatchConfig, item: Item) -> tuple[str, ...]:
    if not item.focus_areas and not item.custom_criteria:
        return tuple(d.name for d in config.default_dimensions)
    chosen = list(item.focus_areas) or [d.name for d in config.default_dimensions]
    return tuple(dict.fromkeys([*chosen, *item.custom_criteria]))


def n_cells(config: BatchConfig, items: Iterable[Item]) -> int:
    return sum(len(item_dimension_names(config, item)) for item in items)


def shared_scale(config: BatchConfig) -> Scale | None:
    """The scale every one of the batch's own dimensions is on, if they share one."""
    scales = {(d.resolved_scale.min, d.resolved_scale.max) for d in config.default_dimensions}
    if len(scales) != 1:
        return None
    low, high = scales.pop()
    return Scale(min=low, max=high)


class ItemDimensions:
    """Collects, item by item while a batch is validated, the criteria items bring and the
    number of cells; then gives the batch's config with those criteria added."""

    def __init__(self, config: BatchConfig) -> None:
        self.config = config
        self.batch_names = {d.name for d in config.dimensions}
        self.scale = shared_scale(config)
        self.added: dict[str, Dimension] = {}
        self.defined_by: dict[str, str] = {}  # criterion -> the item that first defined it
        self.n_cells = 0
        self.chose = False

    def add(self, item: Item) -> list[str]:
        """Take in one item; returns its problems (none: its cells are counted)."""
        problems: list[str] = []
        own: dict[str, Dimension] = {}
        for name, criterion in item.custom_criteria.items():
            dimension, problem = self._custom(item, name, criterion)
            if problem:
                problems.append(problem)
            elif dimension is not None:
                own[name] = dimension
        unknown = [
            area
            for area in dict.fromkeys(item.focus_areas)
            if area not in self.batch_names
            and area not in item.custom_criteria
            and builtin_criterion(area) is None
        ]
        if unknown:
            problems.append(self._unknown(item, unknown))
        names = _chosen(self.config, item)
        if not names:
            problems.append(
                f"item {item.id!r} is judged on no dimension: the batch's dimensions are all "
                "item_only; name some in its focus_areas"
            )
        if problems:
            return problems
        for name in names:
            if name in self.batch_names or name in self.added:
                continue
            dimension = own.get(name) or self._builtin(name)
            self.added[name] = dimension
            self.defined_by[name] = item.id
        self.chose = self.chose or bool(item.focus_areas or item.custom_criteria)
        self.n_cells += len(names)
        return []

    def batch_config(self) -> BatchConfig:
        """The batch's config with the criteria items brought, after its own, in the order
        items first named them."""
        if not self.chose:
            return self.config
        dimensions = [*self.config.dimensions, *self.added.values()]
        return self.config.model_copy(
            update={"dimensions": dimensions, "per_item_dimensions": True}
        )

    def _builtin(self, name: str) -> Dimension:
        scale = self.scale.model_dump() if self.scale else None
        return Dimension.model_validate({"name": name, "scale": scale, "item_only": True})

    def _custom(
        self, item: Item, name: str, criterion: ItemCriterion
    ) -> tuple[Dimension | None, str | None]:
        where = f"item {item.id!r}: custom_criteria.{name}"
        if name in self.batch_names:
            return None, (
                f"{where}: {name!r} is already one of the batch's dimensions; name the item's "
                "own criterion differently, or name the batch's in focus_areas"
            )
        scale = criterion.scale
        if scale is None and self.scale is not None:
            scale = self.scale.model_dump()
        try:
            dimension = Dimension.model_validate(
                {
                    "name": name,
                    "description": criterion.rubric,
                    "scale": scale,
                    "threshold": criterion.threshold,
                    "item_only": True,
                }
            )
        except ValidationError as exc:
            reasons = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
            return None, f"{where}: {reasons}"
        earlier = self.added.get(name)
        if earlier is not None and earlier != dimension:
            return None, (
                f"{where}: item {self.defined_by[name]!r} defines a criterion {name!r} "
                "differently; criteria of one name must be alike in a batch (give this one "
                "another name)"
            )
        return dimension, None

    def _unknown(self, item: Item, unknown: list[str]) -> str:
        known = sorted(self.batch_names | set(item.custom_criteria))
        return (
            f"item {item.id!r}: focus_areas names {', '.join(repr(u) for u in unknown)}, which "
            f"is neither one of the batch's dimensions ({', '.join(known)}), a built-in "
            "criterion, nor one of the item's custom_criteria; define it under the item's "
            "custom_criteria (name and description) or the batch's dimensions"
        )
