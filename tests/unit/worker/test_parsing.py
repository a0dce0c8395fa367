"""worker.parsing.parse_score: every answer shape a judge uses, and every way it can go wrong."""

from __future__ import annotations

import pytest

from jury.errors import ScoreParseError, TransientJudgeError
from jury.schemas.batch import Scale
from jury.schemas.results import MAX_REASONING_CHARS
from jury.worker.judging.parsing import parse_score

FIVE = Scale(min=1, max=5)
TEN = Scale(min=0, max=10)
SIGNED = Scale(min=-2, max=2)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"score": 4}', 4.0),
        ('{"score": 4, "reasoning": "fine"}', 4.0),
        ('  {"score": 2}\n', 2.0),
        ('{"score": "4"}', 4.0),
        ('{"score": "4/5"}', 4.0),
        ('{"Score": 3}', 3.0),
        ('{"rating": 2}', 2.0),
        ('{"final_score": 5}', 5.0),
    ],
)
def test_plain_json(text: str, expected: float) -> None:
    assert parse_score(text, FIVE).score == expected


def test_fenced_json_block_with_prose_around() -> None:
    text = (
        "Let me think about this carefully.\n\n"
        '```json\n{"score": 3, "reasoning": "Partly on point."}\n```\n'
        "I hope this helps! Score: 1 was not deserved."
    )
    parsed = parse_score(text, FIVE)
    assert parsed.score == 3.0
    assert parsed.reasoning == "Partly on point."


def test_fence_without_language_tag() -> None:
    assert parse_score('Here:\n```\n{"score": 2}\n```', FIVE).score == 2.0


def test_json_object_amid_prose() -> None:
    text = 'My verdict is {"score": 2, "rationale": "Mostly off topic."} and that is final.'
    parsed = parse_score(text, FIVE)
    assert parsed == (2.0, "Mostly off topic.")


def test_nested_json_object_amid_prose() -> None:
    text = 'Result: {"evaluation": {"score": 4}} done'
    assert parse_score(text, FIVE).score == 4.0


def test_json_amid_prose_with_braces_inside_the_reasoning() -> None:
    # A JSON answer wrapped in prose whose reasoning quotes code with braces is still JSON.
    text = (
        'Sure! {"score": 4, "reasoning": "The snippet `if (x) { y(); }` is correct."} '
        "Hope this helps."
    )
    parsed = parse_score(text, FIVE)
    assert parsed.score == 4.0
    assert parsed.reasoning == "The snippet `if (x) { y(); }` is correct."


@pytest.mark.parametrize(
    "text",
    [
        "<Score>4</Score>",
        "<score>4</score>",
        "<SCORE> 4 </SCORE>",
        "<Score>4/5</Score>",
        "<score>4 / 5</score>",
        "Reasoning first.\n<Score>4</Score>\nThanks.",
    ],
)
def test_score_tag_any_case(text: str) -> None:
    assert parse_score(text, FIVE).score == 4.0


def test_score_tags_that_disagree_are_unparseable_not_guessed() -> None:
    with pytest.raises(ScoreParseError) as info:
        parse_score("<score>1</score> no wait <score>3</score>", FIVE)
    assert info.value.kind == "unparseable"
    assert "disagree (1, 3)" in str(info.value) and "no wait" in str(info.value)


@pytest.mark.parametrize(
    ("text", "scale", "expected"),
    [
        ("Score: 7", TEN, 7.0),
        ("Score: 4/5", FIVE, 4.0),
        ("Score: 4 / 5", FIVE, 4.0),
        ("score:4", FIVE, 4.0),
        ("SCORE = 3", FIVE, 3.0),
        ("**Score:** 3", FIVE, 3.0),
        ("Final score: 2/5", FIVE, 2.0),
        ("The final score is 4.", FIVE, 4.0),
    ],
)
def test_score_line(text: str, scale: Scale, expected: float) -> None:
    assert parse_score(text, scale).score == expected


def test_markdown_bold_label_before_the_colon() -> None:
    # "**Score**: 4" is as common in judge answers as "**Score:** 4".
    assert parse_score("**Score**: 4", FIVE).score == 4.0


def test_last_score_line_wins() -> None:
    text = (
        "The rubric says Score: 1 means unrelated and Score: 5 means on point.\n"
        "Here the answer is mostly right.\n"
        "Score: 4"
    )
    assert parse_score(text, FIVE).score == 4.0


def test_json_takes_precedence_over_score_lines() -> None:
    assert parse_score('Score: 1\n{"score": 5}', FIVE).score == 5.0


@pytest.mark.parametrize("key", ["reasoning", "rationale", "explanation", "Reasoning"])
def test_reasoning_from_json_keys(key: str) -> None:
    parsed = parse_score(f'{{"score": 3, "{key}": "Because."}}', FIVE)
    assert parsed.reasoning == "Because."


def test_reasoning_tag() -> None:
    text = "<Reasoning>\n  Clear and on point.\n</Reasoning>\n<Score>5</Score>"
    assert parse_score(text, FIVE) == (5.0, "Clear and on point.")


def test_reasoning_line() -> None:
    text = "Reasoning: The answer skips the second question.\nScore: 3/5"
    assert parse_score(text, FIVE) == (3.0, "The answer skips the second question.")


def test_no_reasoning_is_none() -> None:
    assert parse_score('{"score": 3}', FIVE).reasoning is None
    assert parse_score("Score: 3", FIVE).reasoning is None


def test_long_reasoning_is_truncated() -> None:
    long = "x" * (MAX_REASONING_CHARS * 3)
    parsed = parse_score(f'{{"score": 4, "reasoning": "{long}"}}', FIVE)
    assert parsed.reasoning is not None
    assert len(parsed.reasoning) == MAX_REASONING_CHARS
    parsed = parse_score(f"Reasoning: {long}\nScore: 4", FIVE)
    assert parsed.reasoning is not None
    assert len(parsed.reasoning) == MAX_REASONING_CHARS


def test_reasoning_at_the_limit_is_kept_whole() -> None:
    exact = "y" * MAX_REASONING_CHARS
    assert parse_score(f'{{"score": 4, "reasoning": "{exact}"}}', FIVE).reasoning == exact


@pytest.mark.parametrize("text", [None, "", "   ", "\n\t\n"])
def test_empty_text_is_an_error(text: str | None) -> None:
    with pytest.raises(ScoreParseError) as info:
        parse_score(text, FIVE)
    assert info.value.kind == "unparseable"


@pytest.mark.parametrize(
    "text",
    [
        "I cannot evaluate this output.",
        "The answer is great!",
        '{"reasoning": "no score key"}',
        '{"score": "high"}',
        '{"score": null}',
        "<score>four</score>",
        "Score: N/A",
    ],
)
def test_garbage_is_unparseable(text: str) -> None:
    with pytest.raises(ScoreParseError) as info:
        parse_score(text, FIVE)
    assert info.value.kind == "unparseable"


@pytest.mark.parametrize(
    "text",
    ['{"score": NaN}', '{"score": Infinity}', '{"score": -Infinity}', '{"score": "nan"}'],
)
def test_non_finite_scores_are_rejected(text: str) -> None:
    with pytest.raises(ScoreParseError):
        parse_score(text, FIVE)


@pytest.mark.parametrize("text", ['{"score": true}', '{"score": false}'])
def test_boolean_score_is_rejected(text: str) -> None:
    with pytest.raises(ScoreParseError) as info:
        parse_score(text, FIVE)
    assert info.value.kind == "unparseable"


@pytest.mark.parametrize(
    "text", ['{"score": 6}', "Score: 7", "<score>0</score>", '{"score": 5.01}', "Score: -1"]
)
def test_out_of_scale_is_rejected_not_clamped(text: str) -> None:
    with pytest.raises(ScoreParseError) as info:
        parse_score(text, FIVE)
    assert info.value.kind == "out_of_scale"
    assert "1..5" in str(info.value)


def test_scale_bounds_are_inclusive() -> None:
    assert parse_score("Score: 1", FIVE).score == 1.0
    assert parse_score("Score: 5", FIVE).score == 5.0


def test_parse_errors_are_transient() -> None:
    # A retry may well get a usable answer: the retry loop relies on this.
    with pytest.raises(TransientJudgeError):
        parse_score("nothing here", FIVE)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"score": -2}', -2.0),
        ('{"score": "-1"}', -1.0),
        ("Score: -1", -1.0),
        ("<score>-1.5</score>", -1.5),
        ("Score: 0", 0.0),
        ("Score: +2", 2.0),
    ],
)
def test_negative_scale(text: str, expected: float) -> None:
    assert parse_score(text, SIGNED).score == expected


@pytest.mark.parametrize("text", ["Score: -3", '{"score": 2.5}', "<score>-2.01</score>"])
def test_negative_scale_out_of_range(text: str) -> None:
    with pytest.raises(ScoreParseError) as info:
        parse_score(text, SIGNED)
    assert info.value.kind == "out_of_scale"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"score": 3.5}', 3.5),
        ('{"score": "4.25"}', 4.25),
        ("Score: 2.5", 2.5),
        ("Score: 4.5/5", 4.5),
        ("<score>1.75</score>", 1.75),
    ],
)
def test_decimals(text: str, expected: float) -> None:
    assert parse_score(text, FIVE).score == expected
