"""Submit-time changes to a batch file, without editing it: `--set judges.0.n=5` (a dotted
path into the file, the value read as YAML), the shorthands `--temperature`, `--concurrency`
and `--model` (every judge's setting), and `--sample N --seed S` (a reproducible sample of
the items). Pure functions over the parsed document, before it is validated: an override
that makes the batch invalid is refused as the file itself would be, with its path.

`${VAR}` placeholders given in an override are stored as written and expanded on the worker,
as in the file (schemas.placeholders): a secret never reaches the database.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from jury.batchfile.loading import BatchSource, ItemStats
from jury.errors import JuryError
from jury.schemas.item_dimensions import n_cells


@dataclass(frozen=True)
class Override:
    """One `--set PATH=VALUE`: the path's parts and the value, parsed as YAML."""

    text: str  # as given, for messages
    path: tuple[str, ...]
    value: Any


def parse_override(text: str) -> Override:
    """`judges.0.n=5` → path ('judges', '0', 'n'), value 5; `name=x` → 'x'; `x=` → None."""
    key, sep, raw = text.partition("=")
    parts = tuple(part.strip() for part in key.strip().split("."))
    if not sep or not key.strip() or any(not part for part in parts):
        raise JuryError(
            f"--set {text!r}: write PATH=VALUE, PATH dotted into the batch file "
            "(`judges.0.n=5`, `aggregation.across_models=median`)"
        )
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        reason = str(exc).splitlines()[0]
        raise JuryError(f"--set {text!r}: the value is not valid YAML ({reason})") from None
    return Override(text, parts, value)


def _child(node: Any, part: str, where: str, create: bool) -> Any:
    if isinstance(node, dict):
        if part not in node and create:
            node[part] = {}
        if part not in node:
            raise KeyError(f"{where}: no such key")
        return node[part]
    if isinstance(node, list):
        index = _index(part, node, where)
        return node[index]
    raise KeyError(f"{where}: is a value, not a mapping or list")


def _index(part: str, node: list[Any], where: str) -> int:
    try:
        index = int(part)
    except ValueError:
        raise KeyError(f"{where}: a list, indexed by a number (0 for the first)") from None
    if not -len(node) <= index < len(node):
        raise KeyError(f"{where}: the list holds {len(node)} entries (0 to {len(node) - 1})")
    return index


def apply_override(data: dict[str, Any], override: Override) -> None:
    """Set the value at the override's path; mappings on the way are created when missing,
    list indices must exist. Raises JuryError naming the path."""
    node: Any = data
    *parents, last = override.path
    where = ""
    try:
        for part in parents:
            where = f"{where}.{part}" if where else part
            node = _child(node, part, where, create=True)
        where = f"{where}.{last}" if where else last
        if isinstance(node, dict):
            node[last] = override.value
        elif isinstance(node, list):
            node[_index(last, node, where)] = override.value
        else:
            raise KeyError(f"{where}: its parent is a value, not a mapping or list")
    except KeyError as exc:
        raise JuryError(f"--set {override.text!r}: {exc.args[0]}") from None


def judge_overrides(data: dict[str, Any], field: str, value: Any) -> list[Override]:
    """A shorthand's overrides: `field` set on every judge of the file."""
    judges = data.get("judges")
    if not isinstance(judges, list):
        return []
    return [
        Override(f"judges.{i}.{field}={value}", ("judges", str(i), field), value)
        for i in range(len(judges))
    ]


def apply_overrides(data: dict[str, Any], overrides: Iterable[Override]) -> None:
    for override in overrides:
        # A judge written as a bare model string becomes a mapping before a field is set.
        if override.path[:1] == ("judges",) and len(override.path) > 2:
            judges = data.get("judges")
            if isinstance(judges, list):
                data["judges"] = [{"model": j} if isinstance(j, str) else j for j in judges]
        apply_override(data, override)


@dataclass(frozen=True)
class SubmitOptions:
    """What `jury submit` (and `jury.submit`) change in a batch before validating it."""

    sets: Sequence[str] = ()
    temperature: float | None = None
    concurrency: int | None = None
    model: str | None = None

    def overrides(self, data: dict[str, Any]) -> list[Override]:
        found = [parse_override(text) for text in self.sets]
        shorthands = {
            "temperature": self.temperature,
            "max_in_flight": self.concurrency,
            "model": self.model,
        }
        for field, value in shorthands.items():
            if value is not None:
                found += judge_overrides(data, field, value)
        return found

    def apply(self, data: dict[str, Any]) -> None:
        apply_overrides(data, self.overrides(data))


def sample_indices(count: int, size: int, seed: int) -> list[int]:
    """`size` positions out of `count`, in file order, the same for the same seed."""
    if size >= count:
        return list(range(count))
    return sorted(random.Random(seed).sample(range(count), size))


def sample_items(source: BatchSource, size: int, seed: int) -> BatchSource:
    """The same batch with a reproducible random sample of `size` of its (validated) items,
    kept in file order: `--sample 32 --seed 42` picks the same 32 items on every machine."""
    if size >= source.stats.count:
        return source
    wanted = set(sample_indices(source.stats.count, size, seed))
    items = [item for index, item in enumerate(source.items()) if index in wanted]
    chars = source.stats.text_chars * len(items) // max(source.stats.count, 1)
    return dataclasses.replace(
        source,
        inline_items=items,
        items_file=None,
        stats=ItemStats(len(items), chars, cells=n_cells(source.config, items)),
    )
