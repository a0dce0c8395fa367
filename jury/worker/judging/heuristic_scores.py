"""A heuristic judge's measure of one output text (jury.schemas.heuristics): pure, and light to
import, since the processes that measure (jury.worker.judging.heuristic_process) import it.

A callable that cannot be imported, is not allowed, raises, or returns something other than a
finite number on its range raises HeuristicError, with its own kind.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import islice

from jury.schemas.batch import Dimension, Item, Judge
from jury.schemas.heuristics import (
    CallableHeuristic,
    HeuristicError,
    KeywordHeuristic,
    LengthHeuristic,
    RegexHeuristic,
    resolve_function,
)


def _length(h: LengthHeuristic, text: str) -> tuple[float, str]:
    size = len(text.split()) if h.unit == "words" else len(text)
    low = 0 if h.min is None else h.min
    high = "∞" if h.max is None else h.max
    inside = size >= low and (h.max is None or size <= h.max)
    where = "within" if inside else "outside"
    return (1.0 if inside else 0.0), f"{size} {h.unit}, {where} {low}..{high}"


def _regex(h: RegexHeuristic, text: str) -> tuple[float, str]:
    pattern = h.compiled()
    if h.mode == "count":
        # Matches past count_max change nothing: they are not looked for.
        count = sum(1 for _ in islice(pattern.finditer(text), h.count_max))
        unit = count / h.count_max
        at_least = "at least " if count == h.count_max else ""
        return unit, f"{at_least}{count} matches (full marks at {h.count_max})"
    found = pattern.search(text) is not None
    unit = float(found) if h.mode == "match" else float(not found)
    return unit, "the pattern matches" if found else "the pattern does not match"


def _keyword(h: KeywordHeuristic, text: str) -> tuple[float, str]:
    haystack = text if h.case_sensitive else text.casefold()
    present = [k for k in h.keywords if (k if h.case_sensitive else k.casefold()) in haystack]
    return len(present) / len(h.keywords), f"{len(present)} of {len(h.keywords)} keywords present"


def _called(
    h: CallableHeuristic, item: Item, dimension: Dimension, allowed: Sequence[str]
) -> tuple[float, str]:
    function = resolve_function(h.function, allowed)
    try:
        value = function(item, dimension)
    except Exception as exc:
        raise HeuristicError(
            f"{h.function} raised {type(exc).__name__}: {exc}", kind="heuristic_raised"
        ) from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise HeuristicError(
            f"{h.function} returned a {type(value).__name__}, not a number",
            kind="heuristic_value",
        )
    if not math.isfinite(value):
        raise HeuristicError(f"{h.function} returned {value}", kind="heuristic_value")
    scale = dimension.resolved_scale
    low, high = (0.0, 1.0) if h.returns == "unit" else (scale.min, scale.max)
    if not low <= value <= high:
        raise HeuristicError(
            f"{h.function} returned {value:g}, outside {low:g}..{high:g} (returns: {h.returns})",
            kind="heuristic_value",
        )
    unit = value if h.returns == "unit" else (value - scale.min) / (scale.max - scale.min)
    return float(unit), f"{h.function} returned {value:g}"


def heuristic_score(
    judge: Judge, item: Item, text: str, dimension: Dimension, allowed: Sequence[str] = ()
) -> tuple[float, str]:
    """(score on the dimension's scale, what was measured) of one output text. `allowed`:
    the module prefixes callables may come from (Settings.heuristic_callables)."""
    h = judge.heuristic
    if isinstance(h, LengthHeuristic):
        unit, why = _length(h, text)
    elif isinstance(h, RegexHeuristic):
        unit, why = _regex(h, text)
    elif isinstance(h, KeywordHeuristic):
        unit, why = _keyword(h, text)
    elif isinstance(h, CallableHeuristic):
        unit, why = _called(h, item.model_copy(update={"output": text}), dimension, allowed)
    else:
        raise HeuristicError(f"judge {judge.name} has no heuristic", kind="internal")
    scale = dimension.resolved_scale
    return scale.min + unit * (scale.max - scale.min), why


def measured_texts(
    judge: Judge, item: Item, dimension: Dimension, texts: Sequence[str], allowed: Sequence[str]
) -> list[tuple[float, str]]:
    """Each text's (score, what was measured) on one dimension: one text, or a pair's two."""
    return [heuristic_score(judge, item, text, dimension, allowed) for text in texts]
