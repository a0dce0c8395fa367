"""Reading what a user hands jury, within bounds: regular files only, sizes, nesting depth,
YAML aliases, and numbers that are finite. Every refusal is a BatchFileError (one paragraph,
exit 2), never a MemoryError or a RecursionError.

JSON is parsed as JSON (fast, and with JSON's own error positions); YAML with the C parser
when PyYAML has it, after one pass over its events has checked depth and aliases without
building anything.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import IO, Any

import yaml

from jury.errors import BatchFileError
from jury.schemas.limits import InputLimits
from jury.schemas.strict import non_finite_path

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_OPENS = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSES = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


class DocumentError(ValueError):
    """Text that is not a document jury accepts; the caller says which file and line."""


def open_regular(path: Path, what: str = "file") -> IO[bytes]:
    """`path` opened for reading, if it is a regular file (or a link to one). A FIFO would
    block for ever and a device such as /dev/zero never ends: both are refused, without
    waiting (the file is opened non-blocking and checked once open)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise BatchFileError(str(path), [f"the {what} does not exist"]) from None
    except OSError as exc:
        raise BatchFileError(str(path), [f"cannot read the {what}: {exc.strerror}"]) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO, socket or device"
        raise BatchFileError(
            str(path), [f"the {what} is {kind}, not a regular file: jury reads only files"]
        )
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


_BYTE_ORDER_MARKS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


def encoding_problem(head: bytes) -> str | None:
    """What a file that starts with `head` looks like when it is not UTF-8 text (a UTF-16 or
    UTF-32 file, binary data), or None. Never quotes the bytes themselves."""
    for mark, name in _BYTE_ORDER_MARKS:
        if head.startswith(mark):
            return (
                f"the file is {name} text (it starts with the byte-order mark "
                f"{mark.hex(' ').upper()}), and jury reads UTF-8: convert it first "
                f"(`iconv -f {name} -t UTF-8`)"
            )
    if b"\x00" in head:
        odd = head[1::2].count(0) > len(head) // 4
        even = head[0::2].count(0) > len(head) // 4
        if odd != even:
            return (
                "the file looks like UTF-16 text without a byte-order mark (every other byte is "
                "zero), and jury reads UTF-8: convert it first (`iconv -f UTF-16LE -t UTF-8`)"
            )
        return "the file holds binary data (NUL bytes), not text"
    return None


def size_problem(size: int, limit: int, field: str) -> str | None:
    if size <= limit:
        return None
    return (
        f"the file holds {size:,} bytes, over the limit of {limit:,} "
        f"(raise it with {InputLimits.env_name(field)})"
    )


def read_document(path: Path, limits: InputLimits, what: str = "file") -> str:
    """The whole text of a file parsed at once (a batch file, a JSON array of items)."""
    with open_regular(path, what) as handle:
        # The size first: a read of `limit` bytes would reserve them all at once.
        size = os.fstat(handle.fileno()).st_size
        problem = size_problem(size, limits.max_document_bytes, "max_document_bytes")
        raw = b"" if problem else handle.read(size + 1)
    problem = problem or size_problem(len(raw), limits.max_document_bytes, "max_document_bytes")
    if problem:
        raise BatchFileError(str(path), [problem])
    wrong = encoding_problem(raw[:4096])
    if wrong:
        raise BatchFileError(str(path), [wrong])
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise BatchFileError(str(path), [f"line {line}: not valid UTF-8 text"]) from None


def _value_problem(exc: ValueError) -> str:
    if "digits" in str(exc):  # Python refuses to convert integers of over 4,300 digits
        return "a number holds thousands of digits; only finite numbers of usual size are read"
    return f"a value cannot be read: {exc}"


def too_deep(value: Any, limit: int) -> bool:
    """True if lists and mappings nest deeper than `limit` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def depth_problem(limits: InputLimits) -> str:
    return (
        f"lists and mappings nest deeper than {limits.max_nesting_depth} levels "
        f"(raise it with {InputLimits.env_name('max_nesting_depth')})"
    )


def loads_json(text: str, limits: InputLimits) -> Any:
    """JSON text as Python values: finite numbers only, nesting within the limit. Raises
    json.JSONDecodeError (with its position) or DocumentError."""
    # NaN, Infinity and numbers too large to be finite are read as what they are, then
    # refused with where they sit (`metadata.score: NaN is not …`).
    non_finite: list[str] = []

    def constant(name: str) -> float:
        non_finite.append(f"{name} is not a number jury accepts (only finite numbers are)")
        return math.nan

    def number(written: str) -> float:
        value = float(written)
        if math.isinf(value):
            non_finite.append(f"the number {written[:40]} is too large to be a finite number")
        return value

    try:
        value = json.loads(text, parse_float=number, parse_constant=constant)
    except RecursionError:
        raise DocumentError(depth_problem(limits)) from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # an integer of thousands of digits
        raise DocumentError(_value_problem(exc)) from None
    if too_deep(value, limits.max_nesting_depth):
        raise DocumentError(depth_problem(limits))
    if non_finite:
        where = (non_finite_path(value) or "").removeprefix(".")
        raise DocumentError(f"{where}: {non_finite[0]}" if where else non_finite[0])
    return value


def _check_yaml_events(text: str, limits: InputLimits) -> None:
    """One pass over the YAML events: nesting depth, and the nodes that aliases repeat
    (an anchor's size counts the aliases inside it, so nested aliases multiply)."""
    depth = nodes = alias_nodes = 0
    open_nodes: list[tuple[str | None, int]] = []
    sizes: dict[str, int] = {}
    for event in yaml.parse(text, Loader=_Loader):
        where = f"line {event.start_mark.line + 1}: " if event.start_mark else ""
        if isinstance(event, _OPENS):
            depth += 1
            nodes += 1
            if depth > limits.max_nesting_depth:
                raise DocumentError(where + depth_problem(limits))
            open_nodes.append((event.anchor, nodes))
        elif isinstance(event, _CLOSES):
            depth -= 1
            anchor, first = open_nodes.pop()
            if anchor is not None:
                sizes[anchor] = nodes - first + 1
        elif isinstance(event, yaml.ScalarEvent):
            nodes += 1
            if event.anchor is not None:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor not in sizes:
                raise DocumentError(
                    f"{where}alias *{event.anchor} refers to an anchor that is not defined "
                    "before it, or to one that contains the alias itself"
                )
            size = sizes[event.anchor]
            nodes += size
            alias_nodes += size
            if alias_nodes > limits.max_yaml_alias_nodes:
                raise DocumentError(
                    f"{where}YAML aliases repeat more than {limits.max_yaml_alias_nodes:,} "
                    "nodes (raise it with "
                    f"{InputLimits.env_name('max_yaml_alias_nodes')})"
                )


def loads_yaml(text: str, limits: InputLimits) -> Any:
    """YAML text as Python values, checked before it is built. Raises yaml.YAMLError or
    DocumentError."""
    _check_yaml_events(text, limits)
    try:
        return yaml.load(text, Loader=_Loader)  # a safe loader (CSafeLoader or SafeLoader)
    except RecursionError:
        raise DocumentError(depth_problem(limits)) from None
    except ValueError as exc:  # an integer of thousands of digits
        raise DocumentError(_value_problem(exc)) from None


def is_json(path: Path, text: str) -> bool:
    """JSON by its name, or by its first character when the name says nothing."""
    if path.suffix.lower() == ".json":
        return True
    return path.suffix.lower() not in (".yaml", ".yml") and text.lstrip()[:1] in ("{", "[")


def parse_document(path: Path, text: str, limits: InputLimits) -> Any:
    """A batch file's text (YAML or JSON) as Python values; BatchFileError on any problem."""
    source = str(path)
    try:
        if is_json(path, text):
            try:
                return loads_json(text, limits)
            except json.JSONDecodeError as exc:
                if path.suffix.lower() == ".json":
                    where = f"line {exc.lineno}, column {exc.colno}: "
                    raise BatchFileError(source, [f"{where}not valid JSON: {exc.msg}"]) from None
                # Not JSON after all: a YAML flow mapping also starts with `{`.
        return loads_yaml(text, limits)
    except DocumentError as exc:
        raise BatchFileError(source, [str(exc)]) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise BatchFileError(source, [f"{where}not valid YAML: {exc.problem}"]) from None
    except yaml.YAMLError as exc:
        raise BatchFileError(source, [f"not valid YAML: {exc}"]) from None
