"""Reading a score out of whatever a judge answered: pure functions, one per answer shape.

- one score (`parse_score`): judges answer in many shapes even when asked for JSON: plain
  JSON, JSON in a markdown fence or amid prose, `<Score>4</Score>`, `Score: 4` or
  `Score: 4/5`;
- a pair of scores, of the outputs shown first and second (`parse_pair`);
- a score (or a pair) per criterion, from a combined prompt (`parse_combined`): each criterion
  gets its score or its own error, so the caller can keep what is usable.

A score is read only when it is unambiguous: the first of these forms that the answer uses
decides, and every score that form gives must agree (jury.worker.judging.answer_text reads the
numbers). Anything else is an unparseable answer, stored with its raw text and retried, never
guessed. A score outside the scale is rejected rather than clamped: it means the judge misread
the rubric, and a retry is cheaper than a wrong verdict.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from jury.errors import ScoreParseError
from jury.schemas.batch import Dimension, Scale
from jury.schemas.results import MAX_REASONING_CHARS
from jury.worker.judging.answer_text import (
    FENCE,
    MAX_ANSWER_CHARS,
    NUMBER,
    VALUE,
    embedded_objects,
    json_objects,
    key,
    loads,
    raw_text,
    read_value,
    reasoning_of,
    score_in,
    score_value,
    vote_in,
)

_SCORE_TAG = re.compile(rf"<score>\s*{VALUE}\s*</score>", re.IGNORECASE)
# "Score: 4" at the start of a line (after markdown), or "the final score is 4" anywhere; a
# "score: 1" mid-sentence quotes the rubric more often than it concludes.
_SCORE_LINE = re.compile(
    r"(?:^[ \t>#*_-]*(?:final\s+)?score|\bfinal\s+score)\b\**\s*(?:is)?\s*[:=]?\s*\**\s*" + VALUE,
    re.IGNORECASE | re.MULTILINE,
)
# A JSON answer cut short by max_tokens still states its score plainly.
_SCORE_KEY = re.compile(rf'"(?:final_)?score"\s*:\s*"?{VALUE}', re.IGNORECASE)
_REASONING_TAG = re.compile(r"<reasoning>(.*?)</reasoning>", re.IGNORECASE | re.DOTALL)
_REASONING_LINE = re.compile(r"^\s*(?:reasoning|rationale|explanation)\s*:\s*(.+)$", re.I | re.M)


class ParsedScore(NamedTuple):
    score: float
    reasoning: str | None


class VotedScore(NamedTuple):
    """A score with the judge's pass (True) or fail (False) beside it, None when its vote
    was missing or garbled (`pass_vote`, jury.worker.judging.answer_forms)."""

    score: float
    reasoning: str | None
    vote: bool | None


def _agreed(values: list[float], form: str) -> float:
    distinct = sorted(set(values))
    if len(distinct) > 1:
        shown = ", ".join(f"{v:g}" for v in distinct)
        raise ScoreParseError(f"the answer gives several {form} that disagree ({shown})")
    return distinct[0]


def _json_score(text: str, scale: Scale) -> ParsedScore | None:
    """From the first JSON source that has a score field: the whole answer, else its fenced
    blocks, else the objects embedded in its prose."""
    whole = score_in(loads(text.strip()))
    if whole is not None:
        return ParsedScore(score_value(whole[0], scale), whole[1])
    for sources in (
        [loads(m.group(1).strip()) for m in FENCE.finditer(text)],
        list(embedded_objects(text, outermost=True)),
    ):
        found = [f for f in map(score_in, sources) if f is not None]
        if found:
            score = _agreed([score_value(value, scale) for value, _ in found], "JSON scores")
            return ParsedScore(score, next((r for _, r in found if r is not None), None))
    return None


def _find_score(text: str, scale: Scale) -> ParsedScore | None:
    found = _json_score(text, scale)
    if found is not None:
        return found
    bare = re.fullmatch(rf"\s*{VALUE}\s*", text)  # the whole answer is the score: "4"
    if bare:
        return ParsedScore(read_value(bare.group(1), bare.group(2), scale), None)
    reasoning = _reasoning_from_text(text)
    for pattern, form in (
        (_SCORE_KEY, '"score" fields'),
        (_SCORE_TAG, "<score> tags"),
        (_SCORE_LINE, "score lines"),
    ):
        matches = pattern.findall(text)
        if matches:
            score = _agreed(
                [read_value(number, out_of or None, scale) for number, out_of in matches], form
            )
            return ParsedScore(score, reasoning)
    return None


def _reasoning_from_text(text: str) -> str | None:
    match = _REASONING_TAG.search(text) or _REASONING_LINE.search(text)
    return match.group(1).strip() if match else None


def parse_score(text: str | None, scale: Scale) -> ParsedScore:
    """The score and reasoning in a judge's answer; ScoreParseError if none fits the scale
    unambiguously (its message quotes the start of the answer)."""
    if not text or not text.strip():
        raise ScoreParseError("the judge answered with empty text")
    if len(text) > MAX_ANSWER_CHARS:
        raise ScoreParseError(
            f"the answer holds {len(text):,} characters, more than any judge answer "
            f"({MAX_ANSWER_CHARS:,}); not searched for a score: {raw_text(text)}"
        )
    try:
        found = _find_score(text, scale)
    except ScoreParseError as exc:
        raise ScoreParseError(f"{exc}: {raw_text(text)}") from None
    if found is None:
        raise ScoreParseError(f"no score found in the judge's answer: {raw_text(text)}")
    if not scale.contains(found.score):
        raise ScoreParseError(
            f"score {found.score:g} lies outside the scale {scale.min:g}..{scale.max:g}: "
            f"{raw_text(text)}",
            kind="out_of_scale",
        )
    reasoning = found.reasoning[:MAX_REASONING_CHARS] if found.reasoning else None
    return ParsedScore(found.score, reasoning)


# Keys naming the first and the second output shown, once lowercased and stripped of
# everything but letters and digits.
_FIRST_KEYS = ("score1", "output1", "response1", "first")
_SECOND_KEYS = ("score2", "output2", "response2", "second")
_PAIR_LINE = {
    1: re.compile(rf"\bscore[ _-]?1\b\W{{0,5}}?({NUMBER})", re.IGNORECASE),
    2: re.compile(rf"\bscore[ _-]?2\b\W{{0,5}}?({NUMBER})", re.IGNORECASE),
}


class ParsedPair(NamedTuple):
    """The scores of the output shown first and of the one shown second."""

    first: float
    second: float
    reasoning: str | None


def _checked(value: float, scale: Scale, what: str) -> float:
    if not scale.contains(value):
        raise ScoreParseError(
            f"{what}: score {value:g} lies outside the scale {scale.min:g}..{scale.max:g}",
            kind="out_of_scale",
        )
    return value


def _pair_from_mapping(data: dict[str, Any], scale: Scale) -> tuple[float, float] | None:
    """Both scores, None if either key is missing; ScoreParseError if a value is no score."""
    keyed = {key(k): v for k, v in data.items()}
    first = next((k for k in _FIRST_KEYS if k in keyed), None)
    second = next((k for k in _SECOND_KEYS if k in keyed), None)
    if first is None or second is None:
        return None
    return score_value(keyed[first], scale), score_value(keyed[second], scale)


def parse_pair(text: str | None, scale: Scale) -> ParsedPair:
    """score_1 and score_2 of a pairwise answer; ScoreParseError if either is missing or
    outside the scale."""
    if not text or not text.strip():
        raise ScoreParseError("the judge answered with empty text")
    found: tuple[float, float] | None = None
    reasoning: str | None = None
    try:
        for data in json_objects(text):
            found = _pair_from_mapping(data, scale)
            if found is not None:
                reasoning = reasoning_of(data)
                break
        if found is None:
            lines = [pattern.findall(text) for pattern in (_PAIR_LINE[1], _PAIR_LINE[2])]
            if lines[0] and lines[1]:
                found = _agreed_line(lines[0], scale), _agreed_line(lines[1], scale)
    except ScoreParseError as exc:
        raise ScoreParseError(f"{exc}: {raw_text(text)}") from None
    if found is None:
        raise ScoreParseError(f"no score_1 and score_2 in the judge's answer: {raw_text(text)}")
    first = _checked(found[0], scale, "output_1")
    second = _checked(found[1], scale, "output_2")
    return ParsedPair(first, second, reasoning)


def _agreed_line(values: list[str], scale: Scale) -> float:
    scores = {score_value(value, scale) for value in values}
    if len(scores) > 1:
        shown = ", ".join(f"{v:g}" for v in sorted(scores))
        raise ScoreParseError(f"the answer gives several scores for one output ({shown})")
    return scores.pop()


DimensionAnswer = ParsedScore | VotedScore | ParsedPair | ScoreParseError


def _scores_mapping(text: str, names: Sequence[str]) -> dict[str, Any] | None:
    """The object holding one entry per dimension: `{"scores": {...}}` or the top level."""
    wanted = {key(n) for n in names}
    for data in json_objects(text):
        for candidate in (data.get("scores"), data):
            if isinstance(candidate, dict) and wanted & {key(k) for k in candidate}:
                return candidate
    return None


def _dimension_answer(
    value: Any, dimension: Dimension, paired: bool, vote: bool = False
) -> DimensionAnswer:
    scale = dimension.resolved_scale
    try:
        if paired:
            pair = _pair_from_mapping(value, scale) if isinstance(value, dict) else None
            if pair is None:
                raise ScoreParseError(f"{dimension.name}: no score_1 and score_2")
            reasoning = reasoning_of(value) if isinstance(value, dict) else None
            first = _checked(pair[0], scale, f"{dimension.name}, output_1")
            second = _checked(pair[1], scale, f"{dimension.name}, output_2")
            return ParsedPair(first, second, reasoning)
        reasoning, voted = None, None
        if isinstance(value, dict):
            voted = vote_in(value)[1]
            field = score_in(value)
            if field is None:
                raise ScoreParseError(f"{dimension.name}: no score")
            value, reasoning = field
        number = _checked(score_value(value, scale), scale, dimension.name)
        reasoning = reasoning[:MAX_REASONING_CHARS] if reasoning else None
        return VotedScore(number, reasoning, voted) if vote else ParsedScore(number, reasoning)
    except ScoreParseError as exc:
        if not str(exc).startswith(dimension.name):
            return ScoreParseError(f"{dimension.name}: {exc}", kind=exc.kind)
        return exc


def _cut_short_scores(text: str, dimensions: Sequence[Dimension], paired: bool) -> dict[str, Any]:
    """The scores stated before a JSON answer was cut short (by max_tokens, say): what
    follows each `"<criterion>": {` up to its closing brace, or the end of the text."""
    found: dict[str, Any] = {}
    for dimension in dimensions:
        name = re.escape(dimension.name)
        entry = re.search(rf'"{name}"\s*:\s*(\{{[^{{}}]*\}}?|"?{NUMBER})', text, re.IGNORECASE)
        if entry is None:
            continue
        body = entry.group(1)
        if not body.startswith("{"):
            found[dimension.name] = body.strip('"')
            continue
        keys = ("score_1", "score_2") if paired else ("score",)
        numbers = [re.search(rf'"{k}"\s*:\s*"?({NUMBER})', body, re.IGNORECASE) for k in keys]
        if all(numbers):
            found[dimension.name] = {k: m.group(1) for k, m in zip(keys, numbers, strict=True) if m}
    return found


def parse_combined(
    text: str | None, dimensions: Sequence[Dimension], paired: bool = False, vote: bool = False
) -> dict[str, DimensionAnswer]:
    """Each dimension's score (or pair of scores) in a combined answer, or that dimension's
    own error; ScoreParseError if the answer scores no dimension at all. With `vote`, each
    score comes with the judge's pass vote on that dimension (None when it gave none)."""
    if not text or not text.strip():
        raise ScoreParseError("the judge answered with empty text")
    mapping = _scores_mapping(text, [d.name for d in dimensions])
    if mapping is None:
        mapping = _cut_short_scores(text, dimensions, paired)
    if not mapping:
        raise ScoreParseError(f"no scores per criterion in the judge's answer: {raw_text(text)}")
    by_key = {key(k): v for k, v in mapping.items()}
    answers: dict[str, DimensionAnswer] = {}
    for dimension in dimensions:
        if key(dimension.name) in by_key:
            answers[dimension.name] = _dimension_answer(
                by_key[key(dimension.name)], dimension, paired, vote
            )
        else:
            answers[dimension.name] = ScoreParseError(
                f"the answer has no score for {dimension.name}"
            )
    return answers


def parse_answer(
    text: str, dimensions: Sequence[Dimension], paired: bool, vote: bool = False
) -> dict[str, DimensionAnswer]:
    """Each dimension's score (or pair of scores) in an answer, or that dimension's own error;
    ScoreParseError when the answer is of no use at all. `vote`: read each dimension's pass
    vote too (a combined answer; one criterion's is read by jury.worker.judging.answer_forms)."""
    if len(dimensions) > 1:
        return parse_combined(text, dimensions, paired=paired, vote=vote)
    (dimension,) = dimensions
    scale = dimension.resolved_scale
    found = parse_pair(text, scale) if paired else parse_score(text, scale)
    return {dimension.name: found}
