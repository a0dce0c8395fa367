"""Reading the answers of combined and pairwise prompts: pure functions.

Like worker.parsing, a score outside its scale is an error, never clamped. A combined answer
may score some dimensions and miss others: each dimension gets its score or its own error, so
the caller can keep what is usable.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from schemas.batch import Dimension, Scale
from schemas.errors import ScoreParseError
from schemas.results import MAX_REASONING_CHARS
from worker.parsing import (
    _FENCE,
    _REASON_KEYS,
    ParsedScore,
    _as_number,
    _embedded_objects,
    _from_mapping,
    _loads,
)

_NUMBER = r"[-+]?\d+(?:\.\d+)?"
# Keys naming the first and the second output shown, once lowercased and stripped of
# everything but letters and digits.
_FIRST_KEYS = ("score1", "output1", "response1", "first")
_SECOND_KEYS = ("score2", "output2", "response2", "second")
_PAIR_LINE = {
    1: re.compile(rf"\bscore[ _-]?1\b\W{{0,5}}({_NUMBER})", re.IGNORECASE),
    2: re.compile(rf"\bscore[ _-]?2\b\W{{0,5}}({_NUMBER})", re.IGNORECASE),
}


class ParsedPair(NamedTuple):
    """The scores of the output shown first and of the one shown second."""

    first: float
    second: float
    reasoning: str | None


def _key(name: object) -> str:
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def _json_objects(text: str) -> Iterator[dict[str, Any]]:
    """The whole answer as JSON, then fenced blocks, then any object embedded in prose."""
    for candidate in [
        _loads(text.strip()),
        *(_loads(m.group(1).strip()) for m in _FENCE.finditer(text)),
    ]:
        if isinstance(candidate, dict):
            yield candidate
    yield from _embedded_objects(text)


def _reasoning(data: dict[str, Any]) -> str | None:
    lowered = {str(k).lower(): v for k, v in data.items()}
    found = next((str(lowered[k]) for k in _REASON_KEYS if lowered.get(k) is not None), None)
    return found[:MAX_REASONING_CHARS] if found else None


def _checked(value: float, scale: Scale, what: str) -> float:
    if not scale.contains(value):
        raise ScoreParseError(
            f"{what}: score {value:g} lies outside the scale {scale.min:g}..{scale.max:g}",
            kind="out_of_scale",
        )
    return value


def _pair_from_mapping(data: dict[str, Any]) -> tuple[float, float] | None:
    keyed = {_key(k): v for k, v in data.items()}
    first = next((_as_number(keyed[k]) for k in _FIRST_KEYS if k in keyed), None)
    second = next((_as_number(keyed[k]) for k in _SECOND_KEYS if k in keyed), None)
    if first is None or second is None:
        return None
    return first, second


def parse_pair(text: str | None, scale: Scale) -> ParsedPair:
    """score_1 and score_2 of a pairwise answer; ScoreParseError if either is missing or
    outside the scale."""
    if not text or not text.strip():
        raise ScoreParseError("the judge answered with empty text")
    found: tuple[float, float] | None = None
    reasoning: str | None = None
    for data in _json_objects(text):
        found = _pair_from_mapping(data)
        if found is not None:
            reasoning = _reasoning(data)
            break
    if found is None:
        lines = [pattern.findall(text) for pattern in (_PAIR_LINE[1], _PAIR_LINE[2])]
        if lines[0] and lines[1]:
            found = float(lines[0][-1]), float(lines[1][-1])
    if found is None:
        raise ScoreParseError(f"no score_1 and score_2 in the judge's answer: {text[:120]!r}")
    first = _checked(found[0], scale, "output_1")
    second = _checked(found[1], scale, "output_2")
    return ParsedPair(first, second, reasoning)


DimensionAnswer = ParsedScore | ParsedPair | ScoreParseError


def _scores_mapping(text: str, names: Sequence[str]) -> dict[str, Any] | None:
    """The object holding one entry per dimension: `{"scores": {...}}` or the top level."""
    wanted = {_key(n) for n in names}
    for data in _json_objects(text):
        for candidate in (data.get("scores"), data):
            if isinstance(candidate, dict) and wanted & {_key(k) for k in candidate}:
                return candidate
    return None


def _dimension_answer(value: Any, dimension: Dimension, paired: bool) -> DimensionAnswer:
    scale = dimension.resolved_scale
    try:
        if paired:
            pair = _pair_from_mapping(value) if isinstance(value, dict) else None
            if pair is None:
                raise ScoreParseError(f"{dimension.name}: no score_1 and score_2")
            reasoning = _reasoning(value) if isinstance(value, dict) else None
            first = _checked(pair[0], scale, f"{dimension.name}, output_1")
            second = _checked(pair[1], scale, f"{dimension.name}, output_2")
            return ParsedPair(first, second, reasoning)
        number = _as_number(value)
        reasoning = None
        if number is None and isinstance(value, dict):
            parsed = _from_mapping(value)
            number, reasoning = (parsed.score, parsed.reasoning) if parsed else (None, None)
        if number is None:
            raise ScoreParseError(f"{dimension.name}: no score")
        reasoning = reasoning[:MAX_REASONING_CHARS] if reasoning else None
        return ParsedScore(_checked(number, scale, dimension.name), reasoning)
    except ScoreParseError as exc:
        return exc


def _cut_short_scores(text: str, dimensions: Sequence[Dimension], paired: bool) -> dict[str, Any]:
    """The scores stated before a JSON answer was cut short (by max_tokens, say): what
    follows each `"<criterion>": {` up to its closing brace, or the end of the text."""
    found: dict[str, Any] = {}
    for dimension in dimensions:
        name = re.escape(dimension.name)
        entry = re.search(rf'"{name}"\s*:\s*(\{{[^{{}}]*\}}?|"?{_NUMBER})', text, re.IGNORECASE)
        if entry is None:
            continue
        body = entry.group(1)
        if not body.startswith("{"):
            found[dimension.name] = body.strip('"')
            continue
        keys = ("score_1", "score_2") if paired else ("score",)
        numbers = [re.search(rf'"{k}"\s*:\s*"?({_NUMBER})', body, re.IGNORECASE) for k in keys]
        if all(numbers):
            found[dimension.name] = {k: m.group(1) for k, m in zip(keys, numbers, strict=True) if m}
    return found


def parse_combined(
    text: str | None, dimensions: Sequence[Dimension], paired: bool = False
) -> dict[str, DimensionAnswer]:
    """Each dimension's score (or pair of scores) in a combined answer, or that dimension's
    own error; ScoreParseError if the answer scores no dimension at all."""
    if not text or not text.strip():
        raise ScoreParseError("the judge answered with empty text")
    mapping = _scores_mapping(text, [d.name for d in dimensions])
    if mapping is None:
        mapping = _cut_short_scores(text, dimensions, paired)
    if not mapping:
        raise ScoreParseError(f"no scores per criterion in the judge's answer: {text[:120]!r}")
    by_key = {_key(k): v for k, v in mapping.items()}
    answers: dict[str, DimensionAnswer] = {}
    for dimension in dimensions:
        if _key(dimension.name) in by_key:
            answers[dimension.name] = _dimension_answer(
                by_key[_key(dimension.name)], dimension, paired
            )
        else:
            answers[dimension.name] = ScoreParseError(
                f"the answer has no score for {dimension.name}"
            )
    return answers
