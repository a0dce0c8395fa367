"""Items from the files people have: JSON Lines, a JSON array, CSV (or TSV) and Parquet, with
an optional mapping from item fields to the file's own column names:

    items: {path: answers.csv, fields: {output: answer, input: question}}

Each reader yields records — (where, fields, problem) — as a stream, within bounds: lines
no longer than the batch's item size allows, files that are regular files within their size
limit, nesting within the depth limit. A problem with one record is reported with where it
is and the others are still read; a problem with the whole file stops it at once.

With a mapping, a record holds the mapped columns and the columns named like item fields;
other columns are ignored. Without one, a CSV or Parquet file may hold only item fields.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NamedTuple

from jury.batchfile.documents import (
    DocumentError,
    encoding_problem,
    loads_json,
    open_regular,
    read_document,
    size_problem,
)
from jury.batchfile.test_cases import is_test_case, test_case_fields
from jury.errors import BatchFileError
from jury.schemas.batch import Item
from jury.schemas.limits import InputLimits

FORMATS = ("jsonl", "json", "csv", "tsv", "parquet")
ITEM_FIELDS: tuple[str, ...] = tuple(Item.model_fields)
_SUFFIX_FORMATS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".jsonlines": "jsonl",
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
# Item fields that hold a structure: in a CSV cell, written as JSON.
STRUCTURED = ("metadata", "focus_areas", "custom_criteria")
# JSON around an item's text on one line, beyond 4 bytes per character of the text.
LINE_OVERHEAD_BYTES = 65536
PARQUET_ROWS_PER_BATCH = 512
SPEC_KEYS = ("path", "fields", "format")


class Record(NamedTuple):
    """One item as read: where it is (`line 3`, `row 3`, `[3]`), its fields, or a problem."""

    where: str
    fields: dict[str, Any] | None
    problem: str | None = None


@dataclass(frozen=True)
class ItemsFile:
    """Where a batch's items live and how to read them."""

    path: Path
    format: str | None = None  # None: from the file's name, or its first bytes
    fields: Mapping[str, str] = field(default_factory=dict)  # item field -> column


def line_limit(max_item_chars: int) -> int:
    """Bytes a line of an items file may hold: 4 per character of the item, plus JSON."""
    return 4 * max_item_chars + LINE_OVERHEAD_BYTES


def items_file_spec(raw: Any, batch_dir: Path) -> ItemsFile:
    """`items: PATH` or `items: {path, fields, format}` as an ItemsFile (relative to the
    batch file's folder); raises BatchFileError naming what is wrong."""
    if isinstance(raw, str):
        return ItemsFile((batch_dir / raw).resolve())
    problems: list[str] = []
    unknown = sorted(str(k) for k in raw if k not in SPEC_KEYS)
    if unknown:
        problems.append(f"items: unknown keys {unknown!s:.200} (known: path, fields, format)")
    path = raw.get("path")
    if not isinstance(path, str) or not path.strip():
        problems.append("items.path: the path of the items file is required")
    fmt = raw.get("format")
    if fmt is not None and fmt not in FORMATS:
        problems.append(f"items.format: {fmt!r:.80} is not one of {', '.join(FORMATS)}")
    fields = raw.get("fields") or {}
    if not isinstance(fields, dict):
        problems.append("items.fields: a mapping from item fields to your column names")
        fields = {}
    for target, column in fields.items():
        if target not in ITEM_FIELDS:
            problems.append(
                f"items.fields: {target!r:.80} is not an item field ({', '.join(ITEM_FIELDS)})"
            )
        if not isinstance(column, str) or not column:
            problems.append(f"items.fields.{target}: the name of a column in the file")
    if problems:
        raise BatchFileError("items", problems)
    assert isinstance(path, str)
    return ItemsFile((batch_dir / path).resolve(), fmt, {str(k): v for k, v in fields.items()})


def _sniffed_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in _SUFFIX_FORMATS:
        return _SUFFIX_FORMATS[suffix]
    with open_regular(path, "items file") as handle:
        head = handle.read(4096)
    if head.startswith(b"PAR1"):
        return "parquet"
    return "json" if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"[") else "jsonl"


def read_records(spec: ItemsFile, limits: InputLimits, max_item_chars: int) -> Iterator[Record]:
    """Every record of the items file, in file order, with the mapping applied."""
    fmt = spec.format or _sniffed_format(spec.path)
    if fmt in ("parquet", "csv", "tsv"):
        # Imported here: the tabular readers build on this module's lines and records.
        from jury.batchfile.tabular_items import csv_records, parquet_records

        if fmt == "parquet":
            records = parquet_records(spec, limits)
        else:
            records = csv_records(spec, limits, max_item_chars, "\t" if fmt == "tsv" else ",")
    elif fmt == "json":
        records = _json_array_records(spec.path, limits)
    else:
        records = _jsonl_records(spec.path, limits, max_item_chars)
    for record in records:
        if record.fields is not None and is_test_case(record.fields):
            yield test_case_record(record, spec.fields)
        elif record.fields is None or not spec.fields:
            yield record
        else:
            yield record._replace(fields=mapped(record.fields, spec.fields))


def test_case_record(record: Record, columns: Mapping[str, str] | None = None) -> Record:
    """The record as an item's fields, if it is one of the plan's test cases
    (producer.test_cases); else unchanged. `columns`: the file's mapping, which wins."""
    if record.fields is None or not is_test_case(record.fields):
        return record
    fields, problem = test_case_fields(record.fields, columns or {})
    return Record(record.where, None, problem) if problem else record._replace(fields=fields)


def mapped(record: Mapping[str, Any], fields: Mapping[str, str]) -> dict[str, Any]:
    """The item fields of a record: each mapped column under its item field's name, and the
    columns already named like an item field that no mapping replaces."""
    item = {target: record[column] for target, column in fields.items() if column in record}
    for name in ITEM_FIELDS:
        if name not in fields and name in record:
            item[name] = record[name]
    return item


def open_items(path: Path, limits: InputLimits) -> IO[bytes]:
    handle = open_regular(path, "items file")
    problem = size_problem(_file_size(handle), limits.max_items_file_bytes, "max_items_file_bytes")
    if problem:
        handle.close()
        raise BatchFileError(str(path), [problem])
    return handle


def _file_size(handle: IO[bytes]) -> int:
    return os.fstat(handle.fileno()).st_size


class NumberedLine(NamedTuple):
    number: int
    raw: bytes | None  # None: longer than the limit (and skipped)


def numbered_lines(handle: IO[bytes], limit: int) -> Iterator[NumberedLine]:
    """Physical lines, each read with a bound: an endless line costs `limit` bytes."""
    number = 0
    while raw := handle.readline(limit + 1):
        number += 1
        if len(raw) > limit and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):  # skip the rest, a bounded read at a time
                raw = handle.readline(1 << 20)
            yield NumberedLine(number, None)
            continue
        yield NumberedLine(number, raw.removeprefix(b"\xef\xbb\xbf") if number == 1 else raw)


def too_long(limit: int, max_item_chars: int) -> str:
    return (
        f"the line holds more than {limit:,} bytes, far over max_item_chars "
        f"({max_item_chars:,} characters; raise it in the batch file)"
    )


def _jsonl_records(path: Path, limits: InputLimits, max_item_chars: int) -> Iterator[Record]:
    """A JSON Lines file's records. A file that is clearly something else (another encoding,
    binary data, a first line that is no JSON object) is one problem, not one per line."""
    limit = line_limit(max_item_chars)
    with open_items(path, limits) as handle:
        check_text(path, handle)
        first = True
        for line in numbered_lines(handle, limit):
            where = f"line {line.number}"
            if line.raw is None:
                yield Record(where, None, too_long(limit, max_item_chars))
            elif line.raw.strip():
                record = _json_record(where, line.raw, limits)
                if first and record.fields is None and not line.raw.lstrip().startswith(b"{"):
                    raise BatchFileError(str(path), [_not_jsonl(where, record.problem)])
                first = False
                yield record


def check_text(path: Path, handle: IO[bytes]) -> None:
    """Refuses at once a file that is not UTF-8 text, saying what it looks like."""
    wrong = encoding_problem(handle.read(4096))
    handle.seek(0)
    if wrong:
        raise BatchFileError(str(path), [f"this is not an items file jury reads: {wrong}"])


def _not_jsonl(where: str, problem: str | None) -> str:
    return (
        "this is not JSONL (JSON Lines: one JSON object per line, "
        f'{{"id": …, "output": …}}): {where}, its first line with text, is no JSON object '
        f"({problem}). If it is CSV, TSV or a JSON array, name it so (`items.csv`, or "
        "`items: {path: …, format: csv}`)"
    )


def _json_record(where: str, raw: bytes, limits: InputLimits) -> Record:
    try:
        data = loads_json(raw.decode("utf-8"), limits)
    except UnicodeDecodeError:
        return Record(where, None, "not valid UTF-8 text")
    except json.JSONDecodeError as exc:
        return Record(where, None, f"not valid JSON: {exc.msg} at column {exc.colno}")
    except DocumentError as exc:  # a value it holds (named), or its depth
        return Record(where, None, str(exc))
    if not isinstance(data, dict):
        return Record(where, None, "an item must be a JSON object with at least id and output")
    return Record(where, data)


def _json_array_records(path: Path, limits: InputLimits) -> Iterator[Record]:
    try:
        data = loads_json(read_document(path, limits, "items file"), limits)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise BatchFileError(str(path), [f"{where}: not valid JSON: {exc.msg}"]) from None
    except DocumentError as exc:
        raise BatchFileError(str(path), [str(exc)]) from None
    if not isinstance(data, list):
        raise BatchFileError(
            str(path), ["a JSON items file holds one array of objects, or one object per line"]
        )
    for index, value in enumerate(data):
        if isinstance(value, dict):
            yield Record(f"[{index}]", value)
        else:
            yield Record(f"[{index}]", None, "an item must be a JSON object")


# A header cell that reads like a column's name; anything else (a line of some other file,
# `root:x:0:0:…`) is never quoted back: an error names at most a short excerpt of a file.
