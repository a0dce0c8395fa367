"""Reading what a judge answers under its scoring template, and its pass vote. Pure.

A likert answer is read as every score is (jury.worker.judging.parsing); a continuous one on 0–100
and a true/false/uncertain one as a word; both are then normalised to the criterion's scale
(schemas.judge_prompts), so the stored sample's score is on that scale whatever the template.
The pass vote is read beside the score: a vote missing or garbled leaves the sample without a
vote (None), never without its score.
"""

from __future__ import annotations

import re
from typing import Any

from jury.errors import ScoreParseError
from jury.schemas.batch import Dimension, Scale
from jury.schemas.judge_prompts import CONTINUOUS_MAX, TRUE_FALSE_UNCERTAIN, normalised
from jury.schemas.results import MAX_REASONING_CHARS
from jury.worker.judging.answer_text import (
    MAX_ANSWER_CHARS,
    VOTE_WORDS,
    json_objects,
    key,
    raw_text,
    reasoning_of,
    vote_in,
)
from jury.worker.judging.parsing import (
    DimensionAnswer,
    ParsedScore,
    VotedScore,
    parse_answer,
    parse_score,
)

_VOTE_LINE = re.compile(
    r"^[ \t>#*_-]*(?:test[ _]?)?pass(?:ed)?\**\s*[:=]\s*\**\s*([A-Za-z]+)\b", re.I | re.M
)
ANSWER_KEYS = ("answer", "verdict", "judgment", "judgement")
_ANSWER_LINE = re.compile(
    r"^[ \t>#*_-]*(?:answer|verdict)\**\s*[:=]\s*\**\s*[\"']?([A-Za-z]+)\b", re.I | re.M
)


def parse_vote(text: str | None) -> bool | None:
    """The judge's pass (True) or fail (False): a JSON `pass` field, else a `Pass: yes` line;
    None when the answer has none, or none that reads as pass or fail."""
    if not text or len(text) > MAX_ANSWER_CHARS:
        return None
    for data in json_objects(text):
        has_vote, vote = vote_in(data)
        if has_vote:
            return vote
    lines = {VOTE_WORDS.get(word.lower()) for word in _VOTE_LINE.findall(text)}
    return lines.pop() if len(lines) == 1 else None


def _word(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and value.strip().lower() in TRUE_FALSE_UNCERTAIN:
        return value.strip().lower()
    return None


def parse_true_false(text: str | None) -> ParsedScore:
    """true, false or uncertain as 1, 0 or 0.5: a JSON `answer` field, an `Answer: true`
    line, or the bare word; ScoreParseError otherwise."""
    if not text or not text.strip():
        raise ScoreParseError("the judge answered with empty text")
    if len(text) > MAX_ANSWER_CHARS:
        raise ScoreParseError(f"the answer holds {len(text):,} characters: not searched")
    for data in json_objects(text):
        keyed = {key(k): v for k, v in data.items()}
        found = next((k for k in ANSWER_KEYS if k in keyed), None)
        if found is not None:
            word = _word(keyed[found])
            if word is None:
                raise ScoreParseError(
                    f"the answer field holds {str(keyed[found])[:40]!r}, not true, false or "
                    f"uncertain: {raw_text(text)}"
                )
            reasoning = reasoning_of(data)
            return ParsedScore(TRUE_FALSE_UNCERTAIN[word], reasoning)
    words = {w.lower() for w in _ANSWER_LINE.findall(text)} or {text.strip().strip(".").lower()}
    if len(words) == 1:
        (word,) = words
        if word in TRUE_FALSE_UNCERTAIN:
            return ParsedScore(TRUE_FALSE_UNCERTAIN[word], None)
    raise ScoreParseError(f"no true, false or uncertain in the judge's answer: {raw_text(text)}")


def parse_templated(
    text: str, dimension: Dimension, scoring: str, vote: bool
) -> dict[str, DimensionAnswer]:
    """One criterion's answer under a scoring template, on the criterion's scale, with the
    judge's vote when `vote`. ScoreParseError when the answer holds no usable score."""
    scale = dimension.resolved_scale
    if scoring == "likert":
        found = parse_answer(text, [dimension], paired=False)[dimension.name]
    elif scoring == "continuous":
        found = parse_score(text, Scale(min=0, max=CONTINUOUS_MAX))
    else:
        found = parse_true_false(text)
    assert isinstance(found, ParsedScore)
    score = normalised(scoring, found.score, scale.min, scale.max)
    reasoning = found.reasoning[:MAX_REASONING_CHARS] if found.reasoning else None
    if vote:
        return {dimension.name: VotedScore(score, reasoning, parse_vote(text))}
    return {dimension.name: ParsedScore(score, reasoning)}
