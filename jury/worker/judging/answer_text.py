"""Reading a judge's answer as text: the pieces every answer shape is read with.

Numbers read whole (`1e309` is not 1, `5e-1` is not 5), a fraction only out of the scale's
maximum, JSON objects wherever they start in the text (with their numbers kept as text until
a scale reads them), and the fields that hold a score or its reasoning. jury.worker.judging.parsing
reads the three answer shapes (one score, a pair of scores, a score per criterion) with these.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

from jury.errors import ScoreParseError
from jury.schemas.batch import Scale
from jury.schemas.results import MAX_REASONING_CHARS

# A number read whole: sign, digits, decimals and exponent, not followed by a word character.
NUMBER = r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?(?!\w)"
VALUE = rf"({NUMBER})(?:\s*/\s*({NUMBER}))?"
FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
SCORE_KEYS = ("score", "rating", "final_score", "value")
REASON_KEYS = ("reasoning", "rationale", "explanation", "reason", "justification")
# Longer than any answer a judge's max_tokens allows (32,000 tokens): a provider sending
# more is misbehaving, and the text is not searched.
MAX_ANSWER_CHARS = 1_000_000
# JSON objects are looked for at this many braces of an answer at most: a failed attempt
# costs a scan of the text before it, so a wall of braces would take minutes. An answer with
# more braces before its JSON still has its `"score": N` read by the plainer forms.
MAX_JSON_STARTS = 200
# Numbers stay text until a scale reads them: a JSON 1e309 is not infinity, nor 10**400 an
# integer Python refuses to convert.
JSON_DECODER = json.JSONDecoder(parse_float=str, parse_int=str, parse_constant=str)


def raw_text(text: str) -> str:
    """The start of an answer, quoted, for error messages (stored with the error)."""
    return repr(text[:200]) + ("…" if len(text) > 200 else "")


def read_number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ScoreParseError(f"score {text[:40]} is not a finite number")
    return value


def read_value(numerator: str, denominator: str | None, scale: Scale) -> float:
    """A score and its optional `/ out of`, which must be the scale's maximum."""
    value = read_number(numerator)
    if denominator is not None and read_number(denominator) != scale.max:
        raise ScoreParseError(
            f"score {numerator}/{denominator} is out of {denominator}, but the scale is "
            f"{scale.min:g}..{scale.max:g}: not converted"
        )
    return value


def score_value(value: Any, scale: Scale) -> float:
    """A score field's value (a JSON number, or text such as "4" or "4/5") read on `scale`;
    ScoreParseError when it is not one unambiguous finite number."""
    if isinstance(value, bool) or value is None:
        raise ScoreParseError(f"the score field holds {json.dumps(value)}, not a number")
    if isinstance(value, int | float):
        return read_number(str(value))
    if isinstance(value, str):
        match = re.fullmatch(rf"\s*{VALUE}\s*", value)
        if match:
            return read_value(match.group(1), match.group(2), scale)
    raise ScoreParseError(f"the score field holds {str(value)[:40]!r}, not a number")


def score_field(data: dict[str, Any]) -> tuple[Any, str | None] | None:
    """(the score field's value, the reasoning) of a mapping that has a score key."""
    lowered = {str(k).lower(): v for k, v in data.items()}
    key = next((k for k in SCORE_KEYS if k in lowered), None)
    if key is None:
        return None
    reasoning = next((str(lowered[k]) for k in REASON_KEYS if lowered.get(k) is not None), None)
    return lowered[key], reasoning


def score_in(data: Any) -> tuple[Any, str | None] | None:
    """The score field of a JSON answer: at its top level, else in the first nested mapping
    that has one (`{"evaluation": {"score": 4}}`)."""
    queue = [data]
    while queue:
        node = queue.pop(0)
        if isinstance(node, dict):
            found = score_field(node)
            if found is not None:
                return found
            queue += [v for v in node.values() if isinstance(v, dict)]
    return None


def loads(text: str) -> Any:
    try:
        return JSON_DECODER.decode(text)
    except (ValueError, RecursionError):
        return None


def decoded_from(text: str, start: int) -> tuple[Any, int]:
    """The JSON value that starts at `start` and where it ends; (None, start + 1) if none."""
    try:
        return JSON_DECODER.raw_decode(text, start)
    except (ValueError, RecursionError):
        return None, start + 1


def embedded_objects(text: str, outermost: bool = False) -> Iterator[dict[str, Any]]:
    """The JSON objects that start somewhere in the text, braces inside strings and all
    (tried at its first MAX_JSON_STARTS braces): every one, or only those not inside
    another."""
    start = text.find("{")
    for _ in range(MAX_JSON_STARTS):
        if start == -1:
            return
        value, end = decoded_from(text, start)
        if isinstance(value, dict):
            yield value
        start = text.find("{", end if outermost else start + 1)


def key(name: object) -> str:
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def json_objects(text: str) -> Iterator[dict[str, Any]]:
    """The whole answer as JSON, then fenced blocks, then any object embedded in prose."""
    for candidate in [
        loads(text.strip()),
        *(loads(m.group(1).strip()) for m in FENCE.finditer(text)),
    ]:
        if isinstance(candidate, dict):
            yield candidate
    yield from embedded_objects(text)


def reasoning_of(data: dict[str, Any]) -> str | None:
    lowered = {str(k).lower(): v for k, v in data.items()}
    found = next((str(lowered[k]) for k in REASON_KEYS if lowered.get(k) is not None), None)
    return found[:MAX_REASONING_CHARS] if found else None


# The judge's pass vote (`pass_vote`): its keys, and the words that read as pass or fail.
VOTE_KEYS = ("pass", "testpass", "passed")
VOTE_WORDS = {
    "true": True,
    "pass": True,
    "passed": True,
    "yes": True,
    "false": False,
    "fail": False,
    "failed": False,
    "no": False,
}


def vote_word(value: Any) -> bool | None:
    """A vote's value as pass (True) or fail (False); None when it is neither."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return VOTE_WORDS.get(value.strip().lower())
    return None


def vote_in(data: dict[str, Any]) -> tuple[bool, bool | None]:
    """(whether the mapping has a vote field, the vote it reads as)."""
    keyed = {key(k): v for k, v in data.items()}
    found = next((k for k in VOTE_KEYS if k in keyed), None)
    return (False, None) if found is None else (True, vote_word(keyed[found]))
