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

A pattern is compiled by RE2 (`google-re2`), whose matching time grows linearly with the text
whatever the pattern: a pattern RE2 cannot express (backreferences, lookaround) is refused
where the batch is loaded. An import path is code execution, so callables are off unless the
operator names the module prefixes they may come from (Settings.heuristic_callables, on the
workers and where batches are loaded); a few modules (os, subprocess, builtins, shutil, …)
are refused whatever the setting says. The worker decides again before it imports anything,
whatever the producer checked. Pure except `resolve_function`, which imports: the worker
calls it (in a process of its own, jury.worker.judging.heuristic_process), and loading checks
the path with it before anything is enqueued.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

import re2
from pydantic import Field, field_validator, model_validator

from jury.errors import PermanentJudgeError
from jury.schemas.heuristic_modules import module_under, refused_module
from jury.schemas.strict import StrictModel

MAX_PATTERN_CHARS = 2000
_IMPORT_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
# RE2's own bound on a compiled pattern's memory (its default, 8 MiB): `(a{1000}){1000}`
# is refused when compiled, not built.
_RE2_MAX_MEM = 8 << 20
CALLABLES_SETTING = "JURY_HEURISTIC_CALLABLES"


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
        compile_pattern(value, ignore_case=False)
        return value

    def compiled(self) -> Any:
        return compile_pattern(self.pattern, self.ignore_case)


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
        if any(part.startswith("__") for part in re.split(r"[.:]", value)):
            raise ValueError(f"function {value!r} names a dunder attribute, which is never a score")
        return value


def compile_pattern(pattern: str, ignore_case: bool) -> Any:
    """`pattern` compiled by RE2, or ValueError in one paragraph saying why not."""
    options = re2.Options()
    options.log_errors = False  # the error is ours to report, not RE2's to print on stderr
    options.max_mem = _RE2_MAX_MEM
    options.case_sensitive = not ignore_case
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args else "refused"
        raise ValueError(
            f"the pattern cannot be compiled by RE2, the linear-time engine jury matches "
            f"with ({reason}). RE2 has no backreferences (\\1) and no lookaround "
            "((?=…), (?!…), (?<=…), (?<!…)), which can take time exponential in the text; "
            "rewrite the pattern without them, or measure with a callable heuristic"
        ) from None


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


def callable_problem(path: str, allowed: Sequence[str]) -> str | None:
    """Why the operator's setting (`allowed` module prefixes) refuses the import path, or
    None. Decided from the path alone, before anything is imported."""
    module = path.partition(":")[0]
    if refused_module(module):
        return (
            f"{path} comes from {module}, a module no callable heuristic may come from "
            "(jury refuses os, subprocess, builtins, shutil and the like, whatever is allowed)"
        )
    if not allowed:
        return (
            f"{path} is a callable heuristic, and callable heuristics are off: they run code "
            f"on the workers, so the operator turns them on with {CALLABLES_SETTING} naming "
            "the module prefixes they may come from (on the workers, and where batches are "
            "submitted)"
        )
    if not module_under(module, allowed):
        return f"{path} is not in a module that {CALLABLES_SETTING} allows ({', '.join(allowed)})"
    return None


def resolve_function(path: str, allowed: Sequence[str]) -> Callable[..., Any]:
    """The function an import path (`package.module:function`) names, if the operator's
    setting allows it: the path is checked before its module is imported, and the function
    found must be defined in an allowed module (`allowed_module:os.system` is os's)."""
    problem = callable_problem(path, allowed)
    if problem:
        raise HeuristicError(problem, kind="heuristic_refused")
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
    defined_in = getattr(found, "__module__", None)
    if not isinstance(defined_in, str) or refused_module(defined_in):
        raise HeuristicError(
            f"{path} is defined in {defined_in or 'an unknown module'}, not in the module named",
            kind="heuristic_refused",
        )
    if not module_under(defined_in, allowed):
        raise HeuristicError(
            f"{path} is defined in {defined_in}, which {CALLABLES_SETTING} does not allow",
            kind="heuristic_refused",
        )
    return found


def heuristic_problems(heuristic: Heuristic, where: str, allowed: Sequence[str]) -> list[str]:
    """A callable heuristic's function checked where the batch is loaded: allowed by the
    operator's setting (`allowed` module prefixes), importable and callable (so a typo is
    reported before anything is enqueued, not by every sample)."""
    if not isinstance(heuristic, CallableHeuristic):
        return []
    try:
        resolve_function(heuristic.function, allowed)
    except HeuristicError as exc:
        if exc.kind == "heuristic_refused":
            return [f"{where}.heuristic.function: {exc}"]
        return [
            f"{where}.heuristic.function: {exc}. The module must be importable where jury "
            "runs (on the Python path of the producer and of every worker)"
        ]
    return []
