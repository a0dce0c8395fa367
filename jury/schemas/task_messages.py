"""What a task message may carry, read field by field: a message on the broker is input, as a
batch file is, never trusted for what it says (docs/limits-and-security.md). Pure.

A message's arguments are a reference (schemas.tasks: strings, and a judge task's sample
index) and a few fields a task carries to its next delivery: how long it has waited for a
rate-limit slot, the samples the store refused (judged and paid for already), how often
storing was tried. Each is read here with its type and its bounds; a field missing or unknown,
a value of another type, a number that is not finite, refuses the message (MessageRefused)
before the worker looks at the batch. Whether the reference fits the batch as stored (the
batch, item, dimension and judge exist, the sample index is below the judge's `n`, a carried
sample's score lies on its scale) is the worker's check, jury.worker.judging.message_checks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from pydantic import ValidationError

from jury.errors import MessageRefused
from jury.schemas.results import CellSample
from jury.schemas.tasks import CellRef, GenerationRef, SampleRef

# An item id is at most 200 characters (a pair item's id adds two candidates' names), a name
# at most 100: a reference longer than this is no reference of jury's.
MAX_REF_CHARS = 1000
# A judge's `n` is at most 100; the index is checked against the judge's own `n` later.
MAX_SAMPLE_INDEX = 10_000
# A task carries one sample per dimension its call scores: a combined call of more than this
# many dimensions is no call a judge could answer.
MAX_CARRIED_SAMPLES = 1000
MAX_STORE_RETRIES = 1000
# How much of a refused value the log line shows (as repr: escaped, one line).
SHOWN_CHARS = 60


class JudgeMessage(NamedTuple):
    """A judge task's message, read: its reference and what it carries."""

    ref: SampleRef
    judged: list[CellSample] | None = None
    waited_s: float = 0.0
    parked_at: float | None = None
    live: bool = False
    store_retries: int = 0


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """A value as a log line may quote it: its repr (escaped, on one line), cut short."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def refused(what: str, reason: str, ref: tuple[object, ...] | None = None) -> MessageRefused:
    """The refusal of a message, as the worker's one log line about it shows it."""
    named = "" if ref is None else f" {shown(ref, 4 * SHOWN_CHARS)}"
    return MessageRefused(f"dropped a {what} message{named}: {reason}; nothing called or stored")


class _Reading:
    """One message being read: what it is, and its arguments as its refusal names them."""

    def __init__(self, what: str, args: Any) -> None:
        self.what = what
        self.named = tuple(args) if isinstance(args, list | tuple) else None

    def refused(self, reason: str) -> MessageRefused:
        return refused(self.what, reason, self.named)

    def arguments(self, values: Any, count: int) -> list[Any]:
        if not isinstance(values, list | tuple) or len(values) != count:
            raise self.refused(f"{count} arguments expected, got {shown(values)}")
        return list(values)

    def name(self, value: Any) -> str:
        if not isinstance(value, str) or not 0 < len(value) <= MAX_REF_CHARS:
            raise self.refused(f"argument {shown(value)} is not a name")
        return value

    def names(self, values: Any, count: int) -> list[str]:
        return [self.name(value) for value in self.arguments(values, count)]

    def carried(self, kwargs: Any, allowed: set[str]) -> None:
        if not isinstance(kwargs, Mapping):
            raise self.refused(f"keyword arguments {shown(kwargs)} are not a mapping")
        unknown = sorted(str(k) for k in kwargs if k not in allowed)
        if unknown:
            raise self.refused(f"unknown fields {shown(unknown)}")

    def count(self, value: Any, name: str, most: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
            raise self.refused(f"{name} {shown(value)} is not a count from 0 to {most}")
        return value

    def seconds(self, value: Any, name: str) -> float:
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value) or value < 0:
            raise self.refused(f"{name} {shown(value)} is not a number of seconds")
        return float(value)

    def samples(self, judged: Any) -> list[CellSample]:
        if not isinstance(judged, list) or not 0 < len(judged) <= MAX_CARRIED_SAMPLES:
            raise self.refused("its judged samples are not a list of samples")
        try:
            return [CellSample.model_validate(s) for s in judged]
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise self.refused(f"a judged sample is malformed ({where}: {first['msg']})") from None


def judge_message(args: Sequence[Any], kwargs: Mapping[str, Any]) -> JudgeMessage:
    """A judge task's arguments, read; MessageRefused saying why they cannot be."""
    reading = _Reading("judge task", args)
    *names, sample = reading.arguments(args, 5)
    batch_id, item_id, dimension, judge = (reading.name(name) for name in names)
    index = reading.count(sample, "sample index", MAX_SAMPLE_INDEX)
    reading.carried(kwargs, {"judged", "waited_s", "parked_at", "live", "store_retries"})
    judged, live, parked_at = (
        kwargs.get("judged"),
        kwargs.get("live", False),
        kwargs.get("parked_at"),
    )
    if not isinstance(live, bool):
        raise reading.refused(f"live {shown(live)} is not true or false")
    return JudgeMessage(
        SampleRef(batch_id, item_id, dimension, judge, index),
        None if judged is None else reading.samples(judged),
        reading.seconds(kwargs.get("waited_s", 0.0), "waited_s"),
        None if parked_at is None else reading.seconds(parked_at, "parked_at"),
        live,
        reading.count(kwargs.get("store_retries", 0), "store_retries", MAX_STORE_RETRIES),
    )


def cell_message(args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[CellRef, int]:
    """A cell callback's arguments, read: the cell, and how often storing its verdict was
    tried."""
    reading = _Reading("cell callback", args)
    cell = CellRef(*reading.names(args, 3))
    reading.carried(kwargs, {"store_retries"})
    return cell, reading.count(kwargs.get("store_retries", 0), "store_retries", MAX_STORE_RETRIES)


def generation_message(args: Sequence[Any], kwargs: Mapping[str, Any]) -> GenerationRef:
    """A generation task's arguments, read."""
    reading = _Reading("generation task", args)
    ref = GenerationRef(*reading.names(args, 3))
    reading.carried(kwargs, set())
    return ref
