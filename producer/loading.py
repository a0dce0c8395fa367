"""Reading batch files: YAML or JSON, items inline or in a JSONL file read as a stream.

Every problem is collected and reported with where it is (file, line, field) before anything
is enqueued: validation is all-or-nothing.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from producer.model_catalog import model_problem
from schemas.batch import BatchConfig, Item
from schemas.errors import BatchFileError

MAX_PROBLEMS = 50
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_ITEM_TEXT_FIELDS = (
    "input",
    "output",
    "output_a",
    "output_b",
    "reference",
    "context",
    "prompt_hint",
)


def describe_validation_error(error: ValidationError, prefix: str = "") -> list[str]:
    """One line per problem: the field path, what is wrong, and the offending value."""
    lines = []
    for problem in error.errors():
        path = prefix
        for part in problem["loc"]:
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        message = problem["msg"].removeprefix("Value error, ")
        value = problem.get("input")
        shown = "" if isinstance(value, dict | list) or value is None else f" (got {value!r:.80})"
        lines.append(f"{path or 'batch'}: {message}{shown}")
    return lines


def expand_env(text: str) -> str:
    """`${VAR}` and `${VAR:-default}`, for values such as api_base that differ per machine."""

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = os.environ.get(name) or default
        if value is None:
            raise ValueError(f"environment variable {name} is not set and has no default")
        return value

    return _ENV_REF.sub(replace, text)


@dataclass
class ItemStats:
    count: int = 0
    text_chars: int = 0


@dataclass
class BatchSource:
    """A validated batch: its config, and a way to stream its items again for publishing."""

    path: Path
    config: BatchConfig
    inline_items: list[Item] | None
    items_path: Path | None
    stats: ItemStats

    def items(self) -> Iterator[Item]:
        if self.inline_items is not None:
            yield from self.inline_items
            return
        assert self.items_path is not None
        pairwise = self.config.pairwise is not None
        for _, item in _stream_items_file(self.items_path, self.config.max_item_chars, pairwise):
            yield item


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BatchFileError(str(path), ["the file does not exist"]) from None
    except OSError as exc:
        raise BatchFileError(str(path), [f"cannot read it: {exc.strerror}"]) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise BatchFileError(str(path), [f"line {line}: not valid UTF-8 text"]) from None


def _parse_document(path: Path, text: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise BatchFileError(str(path), [f"{where}not valid YAML/JSON: {exc.problem}"]) from None
    except yaml.YAMLError as exc:
        raise BatchFileError(str(path), [f"not valid YAML/JSON: {exc}"]) from None
    if not isinstance(data, dict):
        raise BatchFileError(
            str(path), ["the top level must be a mapping with judges, dimensions and items"]
        )
    return data


def _expand_judge_env(path: Path, data: dict[str, Any]) -> None:
    judges = data.get("judges")
    if not isinstance(judges, list):
        return
    for index, judge in enumerate(judges):
        if isinstance(judge, dict) and isinstance(judge.get("api_base"), str):
            try:
                judge["api_base"] = expand_env(judge["api_base"])
            except ValueError as exc:
                raise BatchFileError(str(path), [f"judges[{index}].api_base: {exc}"]) from None


def _item_problems(item: Item, max_chars: int) -> str | None:
    size = sum(len(getattr(item, f) or "") for f in _ITEM_TEXT_FIELDS)
    if size > max_chars:
        return f"item {item.id!r} holds {size:,} characters, over max_item_chars ({max_chars:,})"
    return None


def _stream_items_file(
    path: Path, max_chars: int, pairwise: bool = False
) -> Iterator[tuple[int, Item]]:
    """(line number, item) for each non-blank JSONL line; raises on the first bad line."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            yield number, _parse_item_line(path, number, raw, max_chars, pairwise)


def _parse_item_line(
    path: Path, number: int, raw: bytes, max_chars: int, pairwise: bool = False
) -> Item:
    where = f"{path}, line {number}"
    # Checked before decoding: a 50 MB line should be refused without building 50 MB objects.
    if len(raw) > 4 * max_chars + 65536:
        raise BatchFileError(where, [f"the line is {len(raw):,} bytes, far over max_item_chars"])
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise BatchFileError(where, ["not valid UTF-8 text"]) from None
    except json.JSONDecodeError as exc:
        raise BatchFileError(where, [f"not valid JSON: {exc.msg} at column {exc.colno}"]) from None
    if not isinstance(data, dict):
        raise BatchFileError(where, ["an item must be a JSON object with at least id and output"])
    try:
        # The batch's mode decides the item's shape: output, or output_a and output_b.
        item = Item.model_validate(data, context={"pairwise": pairwise})
    except ValidationError as exc:
        raise BatchFileError(where, describe_validation_error(exc, "item")) from None
    problem = _item_problems(item, max_chars)
    if problem:
        raise BatchFileError(where, [problem])
    return item


def _validate_items_file(path: Path, config: BatchConfig) -> ItemStats:
    problems: list[str] = []
    seen: dict[str, int] = {}
    stats = ItemStats()
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise BatchFileError(str(path), ["the items file does not exist"]) from None
    except OSError as exc:
        raise BatchFileError(str(path), [f"cannot read the items file: {exc.strerror}"]) from None
    with handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                item = _parse_item_line(
                    path, number, raw, config.max_item_chars, config.pairwise is not None
                )
            except BatchFileError as exc:
                problems += [f"line {number}: {p}" for p in exc.problems]
                if len(problems) >= MAX_PROBLEMS:
                    break
                continue
            if item.id in seen:
                problems.append(
                    f"line {number}: duplicate item id {item.id!r} (first on line {seen[item.id]})"
                )
            seen.setdefault(item.id, number)
            stats.count += 1
            stats.text_chars += sum(len(getattr(item, f) or "") for f in _ITEM_TEXT_FIELDS)
    if problems:
        raise BatchFileError(str(path), problems)
    if not stats.count:
        raise BatchFileError(str(path), ["the items file holds no items"])
    return stats


def _validate_inline_items(
    raw_items: list[Any], config: BatchConfig
) -> tuple[list[Item], ItemStats]:
    problems: list[str] = []
    items: list[Item] = []
    seen: dict[str, int] = {}
    stats = ItemStats()
    for index, raw in enumerate(raw_items):
        try:
            item = Item.model_validate(raw, context={"pairwise": config.pairwise is not None})
        except ValidationError as exc:
            problems += describe_validation_error(exc, f"items[{index}]")
            continue
        problem = _item_problems(item, config.max_item_chars)
        if problem:
            problems.append(f"items[{index}]: {problem}")
        if item.id in seen:
            problems.append(
                f"items[{index}]: duplicate item id {item.id!r} (first at items[{seen[item.id]}])"
            )
        seen.setdefault(item.id, index)
        items.append(item)
        stats.count += 1
        stats.text_chars += sum(len(getattr(item, f) or "") for f in _ITEM_TEXT_FIELDS)
    if not raw_items:
        problems.append("items: the list is empty")
    if problems:
        raise BatchFileError("items", problems)
    return items, stats


def load_batch(path: str | Path) -> BatchSource:
    """Read and validate a whole batch; raises BatchFileError naming every problem found."""
    path = Path(path)
    data = _parse_document(path, _read_text(path))
    raw_items = data.pop("items", None)
    _expand_judge_env(path, data)
    try:
        config = BatchConfig.model_validate(data)
    except ValidationError as exc:
        problems = describe_validation_error(exc)
        if raw_items is None:
            problems.append("items: missing (an inline list, or the path of a JSONL file)")
        raise BatchFileError(str(path), problems) from None
    model_problems = [
        f"judges[{index}].model: {problem}"
        for index, judge in enumerate(config.judges)
        if judge.enabled and (problem := model_problem(judge.model))
    ]
    if model_problems:
        raise BatchFileError(str(path), model_problems)
    if isinstance(raw_items, list):
        try:
            items, stats = _validate_inline_items(raw_items, config)
        except BatchFileError as exc:
            raise BatchFileError(str(path), exc.problems) from None
        return BatchSource(path, config, items, None, stats)
    if isinstance(raw_items, str) and raw_items.strip():
        items_path = (path.parent / raw_items).resolve()
        stats = _validate_items_file(items_path, config)
        return BatchSource(path, config, None, items_path, stats)
    raise BatchFileError(
        str(path), ["items: missing (an inline list, or the path of a JSONL file)"]
    )
