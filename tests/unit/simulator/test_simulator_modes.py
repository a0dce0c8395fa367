"""simulator.modes: combined and pairwise prompts (as jury's worker writes them) read back,
and answered from the same latent truth as single prompts."""

from __future__ import annotations

import json
import random

import pytest

from jury.schemas.batch import Dimension, Item, Scale
from jury.simulator.modes import answer_mode_prompt, read_mode_prompt
from jury.simulator.personas import PERSONAS
from jury.simulator.prompt_reading import PromptError, messages_text
from jury.worker.judging.prompts import build_messages, combined_messages, pairwise_messages
from tests.simulator_helpers import truth_score

SEED = 5
RELEVANCE = Dimension.model_validate("relevance")
TONE = Dimension(name="tone", description="Is it kind?", scale=Scale(min=1, max=10))
OUTPUTS = [f"Answer {i}: restart the router and check cable {i}." for i in range(12)]


def answer(persona: str, messages: list[dict[str, str]]) -> dict[str, object]:
    prompt = read_mode_prompt(messages_text(messages))
    assert prompt is not None
    text = answer_mode_prompt(
        PERSONAS[persona], prompt, seed=SEED, temperature=0.0, rng=random.Random(0)
    )
    data: dict[str, object] = json.loads(text)
    return data


def test_ordinary_prompts_are_left_to_the_single_reader() -> None:
    item = Item(id="i", output="x")
    assert read_mode_prompt(messages_text(build_messages(item, RELEVANCE))) is None


def test_combined_answer_scores_each_criterion_on_its_own_truth() -> None:
    for output in OUTPUTS:
        scores = answer(
            "balanced", combined_messages(Item(id="i", output=output), [RELEVANCE, TONE])
        )
        assert set(scores) == {"scores"}
        entries = scores["scores"]
        assert isinstance(entries, dict)
        assert entries["relevance"]["score"] == truth_score(SEED, "relevance", output, 1, 5)
        assert entries["tone"]["score"] == truth_score(SEED, "tone", output, 1, 10)


def test_pairwise_answer_follows_the_order_shown() -> None:
    item = Item(id="p", output_a=OUTPUTS[0], output_b=OUTPUTS[1])
    a_true = truth_score(SEED, "tone", OUTPUTS[0], 1, 10)
    b_true = truth_score(SEED, "tone", OUTPUTS[1], 1, 10)
    a_first = answer("balanced", pairwise_messages(item, TONE, "AB"))
    b_first = answer("balanced", pairwise_messages(item, TONE, "BA"))
    assert (a_first["score_1"], a_first["score_2"]) == (a_true, b_true)
    assert (b_first["score_1"], b_first["score_2"]) == (b_true, a_true)


def test_positional_persona_favours_the_output_shown_first() -> None:
    shifted = 0
    for first, second in zip(OUTPUTS[::2], OUTPUTS[1::2], strict=True):
        item = Item(id="p", output_a=first, output_b=second)
        a_true = truth_score(SEED, "tone", first, 1, 10)
        b_true = truth_score(SEED, "tone", second, 1, 10)
        a_first = answer("positional", pairwise_messages(item, TONE, "AB"))
        b_first = answer("positional", pairwise_messages(item, TONE, "BA"))
        # 0.25 of the 1..10 range, rounded: 2 points for the first shown, up to the top.
        assert a_first["score_1"] == min(10, a_true + 2) and a_first["score_2"] == b_true
        assert b_first["score_1"] == min(10, b_true + 2) and b_first["score_2"] == a_true
        shifted += a_true <= 8
    assert shifted > 0


def test_combined_pairwise_answer() -> None:
    item = Item(id="p", output_a=OUTPUTS[2], output_b=OUTPUTS[3])
    data = answer("balanced", combined_messages(item, [RELEVANCE, TONE], "BA"))
    entries = data["scores"]
    assert isinstance(entries, dict)
    assert entries["relevance"]["score_1"] == truth_score(SEED, "relevance", OUTPUTS[3], 1, 5)
    assert entries["relevance"]["score_2"] == truth_score(SEED, "relevance", OUTPUTS[2], 1, 5)


def test_criteria_inside_the_data_are_not_read() -> None:
    item = Item(id="i", output="- sparkle | scale 1 to 100 | be nice")
    prompt = read_mode_prompt(messages_text(combined_messages(item, [RELEVANCE])))
    assert prompt is not None and [c.name for c in prompt.criteria] == ["relevance"]


def test_a_criteria_header_without_criteria_is_refused() -> None:
    with pytest.raises(PromptError, match="names no"):
        read_mode_prompt("Criteria (score every one):\n<data-ab>\n<output>x</output>\n</data-ab>")
