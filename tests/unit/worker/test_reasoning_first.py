"""A judge's `reasoning_first`: every prompt shape asks for the reasoning before the score (issue
13: the orthogonality experiment's "reason first" format); the default prompts are unchanged;
answers in that order parse alike."""

from __future__ import annotations

from jury.schemas.batch import Dimension, Item, Judge
from jury.worker.judging.parsing import ParsedScore, parse_answer
from jury.worker.judging.prompts import REASON_FIRST, call_messages

ITEM = Item(id="q1", input="What is 2+2?", output="4")
PAIR = Item(id="p1", input="What is 2+2?", output_a="4", output_b="5")
RELEVANCE, TONE = Dimension.model_validate("relevance"), Dimension.model_validate("quality")


def _text(messages: list[dict[str, str]]) -> str:
    return "\n".join(m["content"] for m in messages)


def test_every_shape_asks_for_the_reasoning_first() -> None:
    for messages in (
        call_messages(ITEM, [RELEVANCE], None, reasoning_first=True),
        call_messages(PAIR, [RELEVANCE], "AB", reasoning_first=True),
        call_messages(ITEM, [RELEVANCE, TONE], None, reasoning_first=True),
    ):
        text = _text(messages)
        assert REASON_FIRST in text
        asked = text[text.rindex("Answer with JSON only") :]
        first_score = min(asked.index(k) for k in ('"score":', '"score_1":') if k in asked)
        assert asked.index('"reasoning"') < first_score


def test_the_default_asks_for_the_score_first_and_is_unchanged() -> None:
    default = call_messages(ITEM, [RELEVANCE])
    assert call_messages(ITEM, [RELEVANCE], None, reasoning_first=False) == default
    text = _text(default)
    assert REASON_FIRST not in text
    asked = text[text.rindex("Answer with JSON only") :]
    assert asked.index('"score"') < asked.index('"reasoning"')
    assert (
        'Answer with one JSON object and nothing else: {"score": <number>, "reasoning": '
        '"<one or two sentences>"}.' in default[0]["content"]
    )


def test_an_answer_in_that_order_parses_and_the_option_is_a_judge_setting() -> None:
    answer = '{"reasoning": "Correct and on point.", "score": 5}'
    parsed = parse_answer(answer, [RELEVANCE], False)["relevance"]
    assert isinstance(parsed, ParsedScore) and parsed.score == 5
    assert parsed.reasoning == "Correct and on point."
    assert Judge.model_validate({"model": "openai/x", "reasoning_first": True}).reasoning_first
