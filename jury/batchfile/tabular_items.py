"""Items from tables: CSV (or TSV) and Parquet files, with the header checked before a row is
read and only a short excerpt of it ever quoted (jury.batchfile.item_readers reads the rest).
"""

from __future__ import annotations

import csv
import json
import re
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from jury.batchfile.documents import DocumentError, depth_problem, loads_json, too_deep
from jury.batchfile.item_readers import (
    ITEM_FIELDS,
    PARQUET_ROWS_PER_BATCH,
    STRUCTURED,
    ItemsFile,
    NumberedLine,
    Record,
    check_text,
    line_limit,
    numbered_lines,
    open_items,
    too_long,
)
from jury.errors import BatchFileError
from jury.schemas.limits import InputLimits
from jury.schemas.strict import repeated

_COLUMN_NAME = re.compile(r"[\w .()#%+-]{1,64}")
_COLUMNS_SHOWN = 12


def _shown_columns(columns: list[str]) -> str:
    shown = ", ".join(columns[:_COLUMNS_SHOWN])
    more = len(columns) - _COLUMNS_SHOWN
    return shown + (f" and {more:,} more" if more > 0 else "")


def _header_problem(columns: list[str], fields: Mapping[str, str]) -> str | None:
    """Why the file's columns do not fit the mapping (or, without one, the item fields)."""
    if not all(_COLUMN_NAME.fullmatch(c) for c in columns):
        return (
            "the first line is not a header of column names (is this a CSV file? a file's "
            "format is guessed from its name; `items: {path: …, format: jsonl}` names it)"
        )
    duplicates = repeated(columns)
    if duplicates:
        return f"the columns {_shown_columns(duplicates)} appear twice in the header"
    if fields:
        missing = [f"{c} (for {t})" for t, c in fields.items() if c not in columns]
        if missing:
            return f"no column {', '.join(missing)}; the columns are {_shown_columns(columns)}"
        return None
    unknown = [c for c in columns if c not in ITEM_FIELDS]
    if unknown:
        return (
            f"the columns {_shown_columns(unknown)} are not item fields "
            f"({', '.join(ITEM_FIELDS)}): "
            "map the columns to read with `items: {path: …, fields: {output: your_column}}`, "
            "and the others are ignored"
        )
    return None


def _decoded(lines: Iterator[NumberedLine], limit: int, max_item_chars: int) -> Iterator[str]:
    for line in lines:
        if line.raw is None:
            raise _FileProblem(f"line {line.number}: {too_long(limit, max_item_chars)}")
        try:
            yield line.raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _FileProblem(f"line {line.number}: not valid UTF-8 text") from None


class _FileProblem(Exception):
    """A problem that stops the reading of a whole file (a CSV record cannot be skipped)."""


def csv_records(
    spec: ItemsFile, limits: InputLimits, max_item_chars: int, delimiter: str
) -> Iterator[Record]:
    limit = line_limit(max_item_chars)
    csv.field_size_limit(min(sys.maxsize, max(csv.field_size_limit(), limit)))
    with open_items(spec.path, limits) as handle:
        check_text(spec.path, handle)
        reader = csv.reader(
            _decoded(numbered_lines(handle, limit), limit, max_item_chars), delimiter=delimiter
        )
        try:
            header = next(reader, None)
            if not header:
                raise _FileProblem("the file has no header row naming its columns")
            problem = _header_problem(header, spec.fields)
            if problem:
                raise _FileProblem(f"line 1: {problem}")
            for row in reader:
                where = f"line {reader.line_num}"
                if not any(cell.strip() for cell in row):
                    continue
                if len(row) > len(header):
                    yield Record(
                        where, None, f"{len(row)} cells, but the header names {len(header)}"
                    )
                    continue
                yield _csv_record(where, dict(zip(header, row, strict=False)), spec, limits)
        except csv.Error as exc:
            raise BatchFileError(
                str(spec.path), [f"line {reader.line_num}: not valid CSV: {exc}"]
            ) from None
        except _FileProblem as exc:
            raise BatchFileError(str(spec.path), [str(exc)]) from None


def _csv_record(where: str, row: dict[str, str], spec: ItemsFile, limits: InputLimits) -> Record:
    """A CSV row's item fields: empty cells are absent; metadata, focus_areas and
    custom_criteria are JSON."""
    structured = {spec.fields.get(name, name) for name in STRUCTURED}
    fields: dict[str, Any] = {}
    for column, cell in row.items():
        if cell == "":
            continue
        if column in structured:
            try:
                fields[column] = loads_json(cell, limits)
            except (json.JSONDecodeError, DocumentError):
                return Record(where, None, f"column {column}: not valid JSON ({cell[:40]!r})")
        else:
            fields[column] = cell
    return Record(where, fields)


def parquet_records(spec: ItemsFile, limits: InputLimits) -> Iterator[Record]:
    try:
        import pyarrow.parquet as parquet
    except ImportError:
        raise BatchFileError(
            str(spec.path),
            [
                "reading Parquet needs pyarrow, which jury installs as its `parquet` extra: "
                "pip install 'jury-panel[parquet]' (or pip install pyarrow)"
            ],
        ) from None
    with open_items(spec.path, limits) as handle:
        try:
            table = parquet.ParquetFile(handle)
            columns = list(table.schema_arrow.names)
        except Exception as exc:  # pyarrow's own errors: ArrowInvalid, OSError, …
            raise BatchFileError(str(spec.path), [f"not a Parquet file: {exc}"]) from None
        problem = _header_problem(columns, spec.fields)
        if problem:
            raise BatchFileError(str(spec.path), [problem])
        wanted = sorted({*spec.fields.values(), *(c for c in columns if c in ITEM_FIELDS)})
        row = 0
        try:
            for batch in table.iter_batches(PARQUET_ROWS_PER_BATCH, columns=wanted or None):
                for values in batch.to_pylist():
                    row += 1
                    fields = {k: v for k, v in values.items() if v is not None}
                    if too_deep(fields, limits.max_nesting_depth):
                        yield Record(f"row {row}", None, depth_problem(limits))
                    else:
                        yield Record(f"row {row}", fields)
        except Exception as exc:  # a corrupt page is pyarrow's OSError or ArrowInvalid
            raise BatchFileError(
                str(spec.path), [f"row {row + 1}: cannot be read: {exc}"]
            ) from None
