"""Heuristic judges: a judge on the panel that needs no LLM (a judge's `heuristic:` section).

Each kind measures the output and gives a *unit score*, 0 (worst) to 1 (best), which the
worker maps onto the criterion's scale (`min + unit * (max - min)`), so a heuristic sits on
the panel beside LLM judges and its samples aggregate with theirs:

- `length`: 1 when the output's length (in words or characters) lies within `min`..`max`,
  else 0;
- `regex`: `match` gives 1 when the pattern is found, `no_match` 1 when it is not, `count`
  the number of matches over `count_max` (capped at 1);
- `keyword`: the share of the listed keywords that the output contains (case-insensitive
  unless `case_sensitive`);
- `callable`: a Python function named by import path (`package.module:function`), called
  with the item and the criterion (`function(item, criterion)`); it returns a number from 0
  to 1 (`returns: unit`, the default) or on the criterion's scale (`returns: scale`).

An import path is code execution: it is read only from the batch file (whoever writes the
batch file runs code on the workers anyway), never from item data. Pure: the worker applies
these in jury.worker.judging.heuristics,
except `resolve_function`, which imports: the worker calls it, and loading checks the path with
it before anything is enqueued.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from jury.errors import PermanentJudgeError
from jury.schemas.strict import StrictModel

MAX_PATTERN_CHARS = 2000
_IMPORT_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


class LengthHeuristic(StrictModel):
    kind: Literal["length"]
    unit: Literal["words", "characters"] = "words"
    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _range(self) -> LengthHeuristic:
        if self.min is None and self.max is None:
            raise ValueError("a length heuristic needs `min`, `max` or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"length min ({self.min}) must not exceed max ({self.max})")
        return self


class RegexHeuristic(StrictModel):
    kind: Literal["regex"]
    pattern: str = Field(min_length=1, max_length=MAX_PATTERN_CHARS)
    mode: Literal["match", "no_match", "count"] = "match"
    # With `mode: count`: this many matches (or more) score 1.
    count_max: int = Field(default=1, ge=1, le=1_000_000)
    ignore_case: bool = False

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(
                f"pattern {value!r} is not a valid regular expression: {exc}"
            ) from None
        return value

    def compiled(self) -> re.Pattern[str]:
        return re.compile(self.pattern, re.IGNORECASE if self.ignore_case else 0)


class KeywordHeuristic(StrictModel):
    kind: Literal["keyword"]
    keywords: list[Annotated[str, Field(min_length=1, max_length=500)]] = Field(
        min_length=1, max_length=1000
    )
    case_sensitive: bool = False


class CallableHeuristic(StrictModel):
    kind: Literal["callable"]
    # package.module:function (the function may be an attribute path: module:Class.method).
    function: str = Field(min_length=3, max_length=300)
    # unit: the function returns 0..1, mapped onto the scale; scale: it returns a score on
    # the criterion's own scale, used as it is.
    returns: Literal["unit", "scale"] = "unit"

    @field_validator("function")
    @classmethod
    def _import_path(cls, value: str) -> str:
        if not _IMPORT_PATH.fullmatch(value):
            raise ValueError(f"function {value!r} must be an import path, package.module:function")
        return value


Heuristic = Annotated[
    LengthHeuristic | RegexHeuristic | KeywordHeuristic | CallableHeuristic,
    Field(discriminator="kind"),
]
HEURISTIC_KINDS = ("length", "regex", "keyword", "callable")


def heuristic_judge_defaults(data: Any) -> Any:
    """A judge's raw mapping with a `heuristic:` section, its defaults filled in: `model`
    names the heuristic (heuristic/<kind>) and `n` is 1, since it is deterministic."""
    if not isinstance(data, dict) or data.get("heuristic") is None:
        return data
    heuristic = data["heuristic"]
    kind = heuristic.get("kind") if isinstance(heuristic, dict) else None
    if kind not in HEURISTIC_KINDS:
        kind = "unknown"  # the discriminator reports it; a missing `model` would be noise
    data = dict(data)
    data.setdefault("model", f"heuristic/{kind}")
    data.setdefault("n", 1)
    if data.get("batch_api"):
        raise ValueError("a heuristic judge makes no LLM call, so it has no batch_api")
    return data


class HeuristicError(PermanentJudgeError):
    """A heuristic gave no score; `kind` says why (heuristic_import, heuristic_raised,
    heuristic_value). Permanent: the same output measured again fails the same way."""


def resolve_function(path: str) -> Callable[..., Any]:
    """The function an import path (`package.module:function`) names."""
    module_name, _, attributes = path.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
        for attribute in attributes.split("."):
            found = getattr(found, attribute)
    except Exception as exc:
        raise HeuristicError(
            f"cannot import {path}: {type(exc).__name__}: {exc}", kind="heuristic_import"
        ) from None
    if not callable(found):
        raise HeuristicError(f"{path} is not callable", kind="heuristic_import")
    return found


def heuristic_problems(heuristic: Heuristic, where: str) -> list[str]:
    """A callable heuristic's function checked where the batch is loaded: importable and
    callable (so a typo is reported before anything is enqueued, not by every sample)."""
    if not isinstance(heuristic, CallableHeuristic):
        return []
    try:
        resolve_function(heuristic.function)
    except HeuristicError as exc:
        return [
            f"{where}.heuristic.function: {exc}. The module must be importable where jury "
            "runs (on the Python path of the producer and of every worker)"
        ]
    return []
