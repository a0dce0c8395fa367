"""The simulator's correlated errors (bias groups), the judge that always answers the maximum,
and simulated people's labels."""

from __future__ import annotations

import io
import json
import random
import statistics
import sys

import pytest

from jury.simulator.config import SimulatorConfig, parse_config
from jury.simulator.labels import human_score, label_item, main, preferred_side
from jury.simulator.modes import answer_mode_prompt, read_mode_prompt
from jury.simulator.personas import (
    PERSONAS,
    bias_group,
    find_persona,
    group_shift,
    judge_score,
    latent_quality,
    persona_name,
)
from jury.stats.measures import pearson

TEXTS = [f"Answer {i}: restart the router." for i in range(400)]


def test_model_names_carry_persona_group_and_tag() -> None:
    assert (
        persona_name("strict:family@j2") == "strict" and bias_group("strict:family@j2") == "family"
    )
    assert persona_name("strict@j2") == "strict" and bias_group("strict@j2") is None
    assert bias_group("noisy:") is None and bias_group("noisy") is None
    assert find_persona("lenient:x") is PERSONAS["lenient"]


def test_a_group_shares_its_misjudgements_and_groups_are_independent() -> None:
    a = [group_shift(7, "a", "relevance", t) for t in TEXTS]
    again = [group_shift(7, "a", "relevance", t) for t in TEXTS]
    b = [group_shift(7, "b", "relevance", t) for t in TEXTS]
    assert a == again  # fixed by the item: the same in every run
    assert abs(statistics.fmean(a)) < 0.15 and 0.85 < statistics.stdev(a) < 1.15
    assert abs(pearson(a, b) or 1) < 0.15
    # "ab" + "c" and "a" + "bc" must not collide through the criterion
    assert group_shift(7, "ab", "c", "x") != group_shift(7, "a", "bc", "x")


def test_judges_of_one_group_err_together() -> None:
    def scores(group: str | None) -> list[float]:
        rng = random.Random(0)
        return [
            judge_score(
                PERSONAS["balanced"],
                seed=7,
                criterion="relevance",
                output_text=t,
                data=t,
                low=1,
                high=5,
                temperature=0.0,
                rng=rng,
                group=group,
                group_error=0.2,
            )
            for t in TEXTS
        ]

    truth = [1 + 4 * latent_quality(7, "relevance", t) for t in TEXTS]
    same_a, same_b = scores("fam"), scores("fam")
    other = scores("other")
    assert same_a == same_b  # at temperature 0, nothing but the group's error
    errors = [[s - x for s, x in zip(column, truth, strict=True)] for column in (same_a, other)]
    assert abs(pearson(*errors) or 1) < 0.2
    assert scores(None) == [float(min(5, max(1, int(x + 0.5)))) for x in truth]


def test_the_maximal_persona_always_answers_the_top() -> None:
    rng = random.Random(1)
    for text in TEXTS[:50]:
        score = judge_score(
            PERSONAS["maximal"],
            seed=3,
            criterion="tone",
            output_text=text,
            data=text,
            low=0,
            high=10,
            temperature=1.0,
            rng=rng,
        )
        assert score == 10


def test_a_group_reaches_pairwise_prompts_too() -> None:
    prompt = read_mode_prompt(
        "Criterion: tone\nScale: 1 to 5\n<data-ab12><output_1>x</output_1>"
        "<output_2>y</output_2></data-ab12>"
    )
    assert prompt is not None

    def answer(group: str | None) -> str:
        return answer_mode_prompt(
            PERSONAS["balanced"],
            prompt,
            seed=5,
            temperature=0,
            rng=random.Random(0),
            group=group,
            group_error=1.0,
        )

    assert answer("g") == answer("g") and {answer(f"g{i}") for i in range(6)} != {answer(None)}


def test_group_error_is_configurable_and_checked() -> None:
    assert SimulatorConfig().group_error == 0.2
    assert parse_config(["--group-error", "0.05"]).group_error == 0.05
    with pytest.raises(ValueError, match="group_error"):
        SimulatorConfig(group_error=1.5)


def test_people_label_from_the_truth_with_noise() -> None:
    rng = random.Random(2)
    labels = [human_score(7, "relevance", t, 1, 5, rng=rng) for t in TEXTS]
    truth = [1 + 4 * latent_quality(7, "relevance", t) for t in TEXTS]
    assert all(1 <= label <= 5 for label in labels)
    assert all(label * 3 == round(label * 3) for label in labels)  # the mean of 3 whole points
    assert 0.1 < statistics.fmean(abs(a - b) for a, b in zip(labels, truth, strict=True)) < 0.6
    exact = [human_score(7, "relevance", t, 1, 5, rng=rng, rater_noise=0, raters=1) for t in TEXTS]
    assert exact == [float(int(x + 0.5)) for x in truth]
    sides = {preferred_side(7, "tone", "a", "b", 1, 5, rng=rng, rater_noise=0) for _ in range(3)}
    assert len(sides) == 1


def test_label_items_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    items = [{"id": "1", "output": "x"}, {"id": "2", "output_a": "x", "output_b": "y"}]
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(json.dumps(i) + "\n" for i in items)))
    assert main(["-", "--dimension", "relevance", "--dimension", "tone:0:10", "--seed", "7"]) == 0
    first, second = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert set(first["labels"]) == {"relevance", "tone"} and 0 <= first["labels"]["tone"] <= 10
    assert second["labels"]["relevance"] in ("A", "B", "tie")
    labelled = label_item({"id": "3", "output": "z"}, [("relevance", 1, 5)], 7, random.Random(0))
    assert labelled["id"] == "3" and 1 <= labelled["labels"]["relevance"] <= 5
