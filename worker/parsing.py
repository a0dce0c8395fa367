"""Reading a score out of whatever a judge answered: pure functions.

Judges answer in many shapes even when asked for JSON: plain JSON, JSON in a markdown fence or
amid prose, `<Score>4</Score>`, `Score: 4` or `Score: 4/5`. A score outside the scale is
rejected rather than clamped: it means the judge misread the rubric, and a retry is cheaper
than a wrong verdict.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any, NamedTuple

from schemas.batch import Scale
from schemas.errors import ScoreParseError
from schemas.results import MAX_REASONING_CHARS

_NUMBER = r"[-+]?\d+(?:\.\d+)?"
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_SCORE_TAG = re.compile(rf"<score>\s*({_NUMBER})\s*(?:/\s*{_NUMBER}\s*)?</score>", re.IGNORECASE)
_SCORE_LINE = re.compile(
    rf"\b(?:final\s+)?score\b\**\s*(?:is)?\s*[:=]?\s*\**\s*({_NUMBER})(?:\s*/\s*{_NUMBER})?",
    re.IGNORECASE,
)
# A JSON answer cut short by max_tokens still states its score plainly.
_SCORE_KEY = re.compile(rf'"(?:final_)?score"\s*:\s*"?({_NUMBER})', re.IGNORECASE)
_REASONING_TAG = re.compile(r"<reasoning>(.*?)</reasoning>", re.IGNORECASE | re.DOTALL)
_REASONING_LINE = re.compile(r"^\s*(?:reasoning|rationale|explanation)\s*:\s*(.+)$", re.I | re.M)
_SCORE_KEYS = ("score", "rating", "final_score", "value")
_REASON_KEYS = ("reasoning", "rationale", "explanation", "reason", "justification")


class ParsedScore(NamedTuple):
    score: float
    reasoning: str | None


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        match = re.fullmatch(rf"\s*({_NUMBER})\s*(?:/\s*{_NUMBER}\s*)?", value)
        if not match:
            return None
        number = float(match.group(1))
    else:
        return None
    return number if math.isfinite(number) else None


def _from_mapping(data: Any) -> ParsedScore | None:
    if not isinstance(data, dict):
        return None
    lowered = {str(k).lower(): v for k, v in data.items()}
    for key in _SCORE_KEYS:
        if key in lowered:
            number = _as_number(lowered[key])
            if number is not None:
                reasoning = next(
                    (str(lowered[k]) for k in _REASON_KEYS if lowered.get(k) is not None), None
                )
                return ParsedScore(number, reasoning)
    return None


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _embedded_objects(text: str) -> Iterator[Any]:
    """Every JSON object that starts somewhere in the text, braces inside strings and all."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict):
            yield value
        start = text.find("{", start + 1)


def _find_score(text: str) -> ParsedScore | None:
    candidates = [_loads(text.strip())]
    candidates += [_loads(m.group(1).strip()) for m in _FENCE.finditer(text)]
    for candidate in candidates:
        found = _from_mapping(candidate)
        if found is not None:
            return found
    for candidate in _embedded_objects(text):
        found = _from_mapping(candidate)
        if found is not None:
            return found
    reasoning = _reasoning_from_text(text)
    keyed = _SCORE_KEY.findall(text)
    if keyed:
        return ParsedScore(float(keyed[-1]), reasoning)
    tags = _SCORE_TAG.findall(text)
    if tags:
        return ParsedScore(float(tags[-1]), reasoning)
    # The last "Score: N" is the judge's conclusion; earlier ones may quote the rubric.
    lines = _SCORE_LINE.findall(text)
    if lines:
        return ParsedScore(float(lines[-1]), reasoning)
    return None


def _reasoning_from_text(text: str) -> str | None:
    match = _REASONING_TAG.search(text) or _REASONING_LINE.search(text)
    return match.group(1).strip() if match else None


def parse_score(text: str | None, scale: Scale) -> ParsedScore:
    """The score and reasoning in a judge's answer; ScoreParseError if none fits the scale."""
    if not text or not text.strip():
        raise ScoreParseError("the judge answered with empty text")
    found = _find_score(text)
    if found is None:
        raise ScoreParseError(f"no score found in the judge's answer: {text[:120]!r}")
    if not scale.contains(found.score):
        raise ScoreParseError(
            f"score {found.score:g} lies outside the scale {scale.min:g}..{scale.max:g}",
            kind="out_of_scale",
        )
    reasoning = found.reasoning[:MAX_REASONING_CHARS] if found.reasoning else None
    return ParsedScore(found.score, reasoning)
