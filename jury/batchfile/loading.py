"""Reading batch files: YAML or JSON, items inline or in a file read as a stream (JSON Lines,
a JSON array, CSV or Parquet: producer.item_readers), within the limits of schemas.limits.

Every problem is collected and reported with where it is (file, line, field) before anything
is enqueued: validation is all-or-nothing. `${VAR}` placeholders in a judge's settings are
checked here against this machine's environment but stored as written (schemas.placeholders).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from jury.batchfile.calibration_file import read_calibration_file
from jury.batchfile.documents import parse_document, read_document
from jury.batchfile.egress_check import egress_problems
from jury.batchfile.item_readers import (
    ItemsFile,
    Record,
    items_file_spec,
    read_records,
    test_case_record,
)
from jury.batchfile.judge_config_file import merge_judge_config
from jury.batchfile.model_catalog import model_problem
from jury.batchfile.planning import budget_problems
from jury.batchfile.size_limits import dimensions_problem, document_size_problems, samples_problem
from jury.errors import BatchFileError, ConfigurationError, JuryError
from jury.schemas.batch import BatchConfig, Item, Judge
from jury.schemas.candidates import LLMCandidate, expand_for_candidates
from jury.schemas.egress import EgressPolicy
from jury.schemas.heuristics import CallableHeuristic, heuristic_problems
from jury.schemas.item_dimensions import ItemDimensions
from jury.schemas.labels import label_problems
from jury.schemas.limits import InputLimits
from jury.schemas.output_sets import expand_outputs
from jury.schemas.placeholders import PlaceholderError, expand_fields, has_placeholder, redact
from jury.settings import Settings

MAX_PROBLEMS = 50
_ITEM_TEXT_FIELDS = (
    "input",
    "output",
    "output_a",
    "output_b",
    "reference",
    "context",
    "prompt_hint",
)
_ITEMS_MISSING = "items: missing (an inline list, or the path of an items file)"


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


@dataclass
class ItemStats:
    count: int = 0
    text_chars: int = 0
    labelled: int = 0  # items carrying people's labels
    cells: int = 0  # (item, dimension) verdicts to come: each item's own dimensions
    # Of every item as validated, in order: a submission continued later (`jury resume`)
    # must read the very same items, whatever their file's format.
    _digest: Any = field(default_factory=hashlib.sha256, repr=False)

    def add(self, item: Item) -> None:
        self.count += 1
        self.text_chars += item_chars(item)
        self.labelled += bool(item.labels or item.label)
        self._digest.update(item.model_dump_json().encode())
        self._digest.update(b"\n")

    @property
    def digest(self) -> str:
        return str(self._digest.hexdigest())


@dataclass
class BatchSource:
    """A validated batch: its config, and a way to stream its items again for publishing."""

    path: Path
    config: BatchConfig
    inline_items: list[Item] | None
    items_file: ItemsFile | None
    stats: ItemStats
    limits: InputLimits

    @property
    def items_path(self) -> Path | None:
        return self.items_file.path if self.items_file else None

    def items(self) -> Iterator[Item]:
        if self.inline_items is not None:
            yield from self.inline_items
            return
        assert self.items_file is not None
        records = read_records(self.items_file, self.limits, self.config.max_item_chars)
        for record in with_output_pairs(records, self.config):
            item, problem = _item(record, self.config)
            if item is None:  # the file changed since it was validated
                raise BatchFileError(str(self.items_file.path), [problem or record.where])
            yield item


def item_chars(item: Item) -> int:
    return sum(len(getattr(item, f) or "") for f in _ITEM_TEXT_FIELDS)


def _item_problem(item: Item, max_chars: int) -> str | None:
    size = item_chars(item)
    if size > max_chars:
        return f"item {item.id!r} holds {size:,} characters, over max_item_chars ({max_chars:,})"
    return None


def with_output_pairs(records: Iterable[Record], config: BatchConfig) -> Iterator[Record]:
    """The records, an item with `outputs` as one record per pair of them (its pair items,
    schemas.output_sets), or as a problem."""
    for record in records:
        if record.fields is None:
            yield record
            continue
        try:
            expanded = expand_outputs(record.fields, config.pairwise is not None)
            if config.candidates:  # more than two: a pair item per pair of candidates
                names = [c.name for c in config.candidates]
                expanded = [e for f in expanded for e in expand_for_candidates(f, names)]
        except ValueError as exc:
            yield Record(record.where, None, str(exc))
            continue
        for fields in expanded:
            yield Record(record.where, fields)


def _item(record: Record, config: BatchConfig) -> tuple[Item | None, str | None]:
    """The record as an item, or the problems with it on one line."""
    if record.fields is None:
        return None, f"{record.where}: {record.problem}"
    try:
        # The batch's mode decides the item's shape: output, or output_a and output_b.
        pairwise = config.pairwise is not None
        generated = bool(config.candidates)  # the outputs come later, from the candidates
        context = {"pairwise": pairwise, "generated": generated}
        item = Item.model_validate(record.fields, context=context)
    except ValidationError as exc:
        # Inline items are named by their path (`items[2].output`), file records by their
        # line or row (`line 3: item.output`).
        if record.where.startswith("items["):
            return None, "; ".join(describe_validation_error(exc, record.where))
        lines = describe_validation_error(exc, "item")
        return None, "; ".join(f"{record.where}: {line}" for line in lines)
    problem = _item_problem(item, config.max_item_chars)
    return (None, f"{record.where}: {problem}") if problem else (item, None)


def _validate_records(
    records: Iterator[Record], config: BatchConfig, keep: bool, limits: InputLimits
) -> tuple[list[Item], ItemStats, list[str], BatchConfig]:
    """Every record checked (the items kept only when `keep`), with duplicate ids found; and
    the config with the criteria items brought (schemas.item_dimensions). Reading stops once
    the batch asks for more samples or criteria than the limits allow."""
    problems: list[str] = []
    items: list[Item] = []
    seen: dict[str, str] = {}
    stats = ItemStats()
    dimensions = ItemDimensions(config)
    for record in with_output_pairs(records, config):
        item, problem = _item(record, config)
        if item is None:
            problems.append(problem or record.where)
            if len(problems) >= MAX_PROBLEMS:
                break
            continue
        if item.id in seen:
            first = seen[item.id]
            preposition = "at" if first.startswith("items[") else "on"
            problems.append(
                f"{record.where}: duplicate item id {item.id!r} (first {preposition} {first})"
            )
        seen.setdefault(item.id, record.where)
        item_problems = dimensions.add(item)
        # Labels may name the criteria the item brought (its own, or built-in ones it chose).
        judged = dimensions.batch_config() if item.labels and not item_problems else config
        item_problems += label_problems(judged, item)
        problems += [f"{record.where}: {p}" for p in item_problems]
        too_big = samples_problem(
            dimensions.n_cells, config.samples_per_cell, limits
        ) or dimensions_problem(len(config.dimensions) + len(dimensions.added), limits)
        if too_big:
            problems.append(f"{record.where}: {too_big}")
            break
        stats.add(item)
        if keep:
            items.append(item)
    stats.cells = dimensions.n_cells
    return items, stats, problems[:MAX_PROBLEMS], dimensions.batch_config()


def _with_labels(config: BatchConfig, stats: ItemStats) -> BatchConfig:
    return config.model_copy(update={"has_labels": True}) if stats.labelled else config


def _inline_records(raw_items: list[Any]) -> Iterator[Record]:
    for index, raw in enumerate(raw_items):
        where = f"items[{index}]"
        if isinstance(raw, dict):
            yield test_case_record(Record(where, raw))
        else:
            yield Record(where, None, "not a mapping")


def _callables_allowed(config: BatchConfig) -> list[str]:
    """The module prefixes callable heuristics may come from, by this machine's settings (the
    workers decide again): read only when the batch has a callable, so that a batch without
    one never depends on the workers' settings being set here."""
    if not any(isinstance(j.heuristic, CallableHeuristic) for j in config.judges):
        return []
    try:
        return Settings.from_env().heuristic_callables
    except ValidationError as exc:
        shown = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ConfigurationError(f"bad JURY_* environment: {shown}") from None


def _judge_problems(config: BatchConfig) -> list[str]:
    """Each judge checked as this machine would call it: placeholders expanded (in a copy
    that is not kept), the result a valid judge, its model one LiteLLM knows. Values taken
    from the environment are redacted from the messages."""
    problems: list[str] = []
    allowed = _callables_allowed(config)
    for index, judge in enumerate(config.judges):
        where = f"judges[{index}]"
        try:
            expanded, secrets = expand_fields(judge, os.environ)
        except PlaceholderError as exc:
            problems.append(f"{where}.{exc}")
            continue
        if expanded is not judge:
            try:
                Judge.model_validate(expanded.model_dump())
            except ValidationError as exc:
                lines = describe_validation_error(exc, where)
                problems += [f"{redact(line, secrets)} (placeholders expanded)" for line in lines]
                continue
        if judge.heuristic is not None:  # no model to route: its function must import
            problems += heuristic_problems(judge.heuristic, where, allowed) if judge.enabled else []
            continue
        problem = judge.enabled and model_problem(expanded.model)
        if problem:
            problems.append(f"{where}.model: {redact(problem, secrets)}")
    for index, candidate in enumerate(config.candidates):
        # An LLM candidate's model is routed as a judge's is: a typo is caught here, before
        # every item's answer is an error.
        if isinstance(candidate, LLMCandidate) and not has_placeholder(candidate.model):
            problem = model_problem(candidate.model)
            if problem:
                problems.append(f"candidates[{index}].model: {problem}")
    return problems


def environment_egress() -> EgressPolicy:
    """The egress policy of this machine's environment, as the workers' settings give it."""
    try:
        return Settings.egress_from_env()
    except ValueError as exc:  # pydantic's ValidationError among them
        raise ConfigurationError(f"bad JURY_* environment: {exc}") from None


def load_batch(
    path: str | Path,
    limits: InputLimits | None = None,
    adjust: Callable[[dict[str, Any]], None] | None = None,
    egress: EgressPolicy | None = None,
) -> BatchSource:
    """Read and validate a whole batch; raises BatchFileError naming every problem found.
    `adjust` changes the parsed document before it is validated (`jury submit --set`);
    `egress`: the policy its calls are checked against (this environment's when None)."""
    path = Path(path)
    limits = limits or InputLimits.from_env()
    egress = egress or environment_egress()
    data = parse_document(path, read_document(path, limits, "batch file"), limits)
    if not isinstance(data, dict):
        raise BatchFileError(
            str(path), ["the top level must be a mapping with judges, dimensions and items"]
        )
    # A judge config of its own (`judges: judge_config.json`), before and after the
    # overrides: `--set judges.0.n=5` reaches into it, `--set judges=other.json` names another.
    merge_judge_config(path, data, limits)
    if adjust is not None:
        try:
            adjust(data)
        except BatchFileError:
            raise
        except JuryError as exc:  # a --set that does not fit the file
            raise BatchFileError(str(path), [str(exc)]) from None
        merge_judge_config(path, data, limits)
    raw_items = data.pop("items", None)
    too_big = document_size_problems(data, limits)
    if too_big:
        raise BatchFileError(str(path), too_big)
    try:
        config = BatchConfig.model_validate(data)
    except ValidationError as exc:
        problems = describe_validation_error(exc)
        if raw_items is None:
            problems.append(_ITEMS_MISSING)
        raise BatchFileError(str(path), problems) from None
    judge_problems = _judge_problems(config) + budget_problems(config)
    judge_problems += egress_problems(config, egress)
    if judge_problems:
        raise BatchFileError(str(path), judge_problems)
    config = read_calibration_file(path, config)
    if isinstance(raw_items, list):
        items, stats, problems, config = _validate_records(
            _inline_records(raw_items), config, True, limits
        )
        if not raw_items:
            problems.append("items: the list is empty")
        if problems:
            raise BatchFileError(str(path), problems)
        return BatchSource(path, _with_labels(config, stats), items, None, stats, limits)
    if isinstance(raw_items, dict) or (isinstance(raw_items, str) and raw_items.strip()):
        try:
            spec = items_file_spec(raw_items, path.parent)
        except BatchFileError as exc:
            raise BatchFileError(str(path), exc.problems) from None
        records = read_records(spec, limits, config.max_item_chars)
        _, stats, problems, config = _validate_records(records, config, False, limits)
        if problems:
            raise BatchFileError(str(spec.path), problems)
        if not stats.count:
            raise BatchFileError(str(spec.path), ["the items file holds no items"])
        return BatchSource(path, _with_labels(config, stats), None, spec, stats, limits)
    raise BatchFileError(str(path), [_ITEMS_MISSING])
