"""People's labels on a batch's items, checked against the batch: what Item alone cannot know."""

from __future__ import annotations

from jury.schemas.batch import BatchConfig, Item


def label_problems(config: BatchConfig, item: Item) -> list[str]:
    """What is wrong with an item's labels for this batch: a dimension it does not judge, a
    score outside the dimension's scale. (Their kind, a score or a side, Item checks itself.)"""
    names = [d.name for d in config.dimensions]
    problems = []
    for name, label in item.labels.items():
        if name not in names:
            problems.append(
                f"item {item.id!r}: labels name {name!r}, which is not a dimension of this "
                f"batch ({', '.join(names)})"
            )
        elif isinstance(label, float | int):
            scale = config.dimension(name).resolved_scale
            if not scale.contains(label):
                problems.append(
                    f"item {item.id!r}: its label {label:g} for {name!r} lies outside the "
                    f"scale {scale.min:g}..{scale.max:g}"
                )
    return problems
