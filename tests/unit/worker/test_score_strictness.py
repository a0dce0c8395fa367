"""Scores only when they are unambiguous and inside the scale (issue 18, part 2): the forms
judges really write are read; another scale's fraction, a number read in part, scientific
notation out of range, and several candidates that disagree are unparseable answers, stored
with their raw text, never guessed."""

from __future__ import annotations

import pytest

from jury.errors import ScoreParseError
from jury.schemas.batch import Dimension, Scale
from jury.worker.judging.parsing import MAX_ANSWER_CHARS, parse_combined, parse_pair, parse_score

FIVE = Scale(min=1, max=5)
TEN = Scale(min=0, max=10)
SIGNED = Scale(min=-2, max=2)


def refused(text: str, scale: Scale = FIVE) -> ScoreParseError:
    with pytest.raises(ScoreParseError) as info:
        parse_score(text, scale)
    return info.value


@pytest.mark.parametrize(
    ("text", "scale", "expected"),
    [
        ("4", FIVE, 4.0),
        ("Score: 4", FIVE, 4.0),
        ("Score: 3.5", FIVE, 3.5),
        ('{"score": 4}', FIVE, 4.0),
        ('{"score": 4.0, "reasoning": "ok"}', FIVE, 4.0),
        ("Score: 4/5", FIVE, 4.0),
        ('{"score": "7/10"}', TEN, 7.0),
        ("<score>4e0</score>", FIVE, 4.0),  # scientific notation inside the scale
        ("Score: 4.", FIVE, 4.0),
        ("**Final score:** 2", FIVE, 2.0),
        ('Result: {"score": 3, "details": {"score": 1}}', FIVE, 3.0),  # the outer one speaks
        ('```json\n{"score": 4}\n```\n```json\n{"score": 4}\n```', FIVE, 4.0),  # agree
    ],
)
def test_the_forms_judges_write_are_read(text: str, scale: Scale, expected: float) -> None:
    assert parse_score(text, scale).score == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("Score: 1e309", "not a finite number"),
        ('{"score": 1e309}', "not a finite number"),
        ('{"score": 1' + "0" * 5000 + "}", "not a finite number"),
        ("Score: 2/10", "out of 10, but the scale is 1..5"),
        ('{"score": "2/10"}', "out of 10"),
        ("<score>8/10</score>", "out of 10"),
        ("Score: 4th place", "no score found"),
        ('{"score": 4} and later {"score": 2}', "disagree (2, 4)"),
        ('```json\n{"score": 4}\n```\n```json\n{"score": 2}\n```', "disagree"),
        ("Score: 2\nreasoning...\nScore: 5", "disagree (2, 5)"),
        ('"score": 3, ... "score": 4', "disagree"),
        ('{"score": [4]}', "not a number"),
    ],
)
def test_ambiguous_answers_are_unparseable_with_their_raw_text(text: str, why: str) -> None:
    error = refused(text)
    assert error.kind == "unparseable"
    assert why in str(error)
    assert repr(text[:20])[1:-1] in str(error)  # the raw answer is stored with the error


@pytest.mark.parametrize("text", ["Score: 5e-1", '{"score": 5e-1}', "<score>0.5</score>"])
def test_a_number_read_whole_can_fall_outside_the_scale(text: str) -> None:
    # 5e-1 is 0.5, not 5: outside 1..5, refused like any out-of-scale score
    error = refused(text)
    assert error.kind == "out_of_scale" and "0.5" in str(error)


def test_a_rubric_quoted_mid_sentence_does_not_count() -> None:
    text = "A score: 1 would mean unrelated.\nScore: 4"
    assert parse_score(text, FIVE).score == 4.0


def test_an_answer_of_megabytes_is_not_searched() -> None:
    error = refused('{"score": 4, "reasoning": "' + "x" * MAX_ANSWER_CHARS + '"}')
    assert error.kind == "unparseable" and "more than any judge answer" in str(error)


def test_pairwise_answers_are_strict_too() -> None:
    with pytest.raises(ScoreParseError, match="out of 10"):
        parse_pair('{"score_1": "2/10", "score_2": 3}', FIVE)
    with pytest.raises(ScoreParseError, match="several scores for one output"):
        parse_pair("score_1: 4\nscore_2: 3\nscore_1: 2", FIVE)
    assert parse_pair("score_1: -2\nscore_2: 1", SIGNED)[:2] == (-2.0, 1.0)


def test_combined_answers_refuse_each_bad_dimension_alone() -> None:
    relevance, depth = Dimension(name="relevance"), Dimension(name="depth")
    parsed = parse_combined('{"relevance": "2/10", "depth": 4}', [relevance, depth])
    assert isinstance(parsed["relevance"], ScoreParseError)
    assert "relevance" in str(parsed["relevance"]) and "out of 10" in str(parsed["relevance"])
    assert parsed["depth"] == (4.0, None)
    parsed = parse_combined('{"relevance": 1e309, "depth": 3}', [relevance, depth])
    assert "not a finite number" in str(parsed["relevance"])
