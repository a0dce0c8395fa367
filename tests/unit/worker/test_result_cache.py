"""The result cache's pure parts: the key of a judge call, what is kept, what a hit stores."""

from __future__ import annotations

import re
from typing import Any

import pytest

from jury.schemas.batch import Dimension, Item, Judge
from jury.schemas.pairwise import PairJudgment
from jury.schemas.results import CellSample, SampleResult
from jury.worker.judging.prompts import build_messages
from jury.worker.judging.result_cache import answer_to_keep, cache_key, cached_samples

JUDGE = Judge(model="openai/gpt-4o-mini", temperature=0.8, api_base="http://gpu:8000/v1")
ITEM = Item(id="q1", input="How do I reset my password?", output="Use 'Forgot password'.")
RELEVANCE = Dimension.model_validate("relevance")


def key_of(
    judge: Judge = JUDGE, item: Item = ITEM, dimension: Dimension = RELEVANCE, sample: int = 0
) -> str:
    return cache_key(judge, item, [build_messages(item, dimension)], sample)


def test_the_same_call_has_the_same_key() -> None:
    key = key_of()
    assert re.fullmatch(r"[0-9a-f]{64}", key)
    assert key_of(Judge.model_validate(JUDGE.model_dump()), ITEM.model_copy()) == key


def test_each_sample_index_is_its_own_draw() -> None:
    keys = {key_of(sample=n) for n in range(10)}
    assert len(keys) == 10


@pytest.mark.parametrize(
    ("judge_change", "item_change"),
    [
        ({"model": "openai/gpt-4o"}, {}),
        ({"api_base": "http://other:8000/v1"}, {}),
        ({"api_base": None}, {}),
        ({"temperature": 0.0}, {}),
        ({"max_tokens": 800}, {}),
        ({"name": "second-opinion"}, {}),  # two panel members on one model: distinct draws
        ({}, {"output": "Use the 'Forgot password' link."}),
        ({}, {"reference": "Email link."}),
        ({}, {"prompt_hint": "Must mention the email."}),
        ({}, {"metadata": {"team": "b"}}),  # not in today's prompt, but it is the item's
    ],
)
def test_what_shapes_the_call_changes_the_key(
    judge_change: dict[str, Any], item_change: dict[str, Any]
) -> None:
    judge = Judge.model_validate({**JUDGE.model_dump(exclude={"name"}), **judge_change})
    item = Item.model_validate({**ITEM.model_dump(), **item_change})
    assert key_of(judge, item) != key_of()


def test_another_criterion_or_scale_changes_the_key() -> None:
    assert key_of(dimension=Dimension.model_validate("accuracy")) != key_of()
    wider = Dimension.model_validate({"name": "relevance", "scale": {"min": 1, "max": 10}})
    assert key_of(dimension=wider) != key_of()


def test_what_does_not_shape_the_answer_keeps_the_key() -> None:
    judge = Judge.model_validate(
        {
            **JUDGE.model_dump(),
            "api_key_env": "MY_KEY",
            "timeout_s": 5,
            "weight": 3,
            "rpm": 10,
            "tpm": 1000,
            "input_cost_per_token": 0.1,
        }
    )
    renamed = ITEM.model_copy(update={"id": "q2"})
    assert key_of(judge, renamed) == key_of()


def test_any_text_has_a_key() -> None:
    odd = Item(id="x", output="caf\u00e9 \U0001f600 \u202e \x00")
    assert key_of(item=odd) != key_of(item=odd.model_copy(update={"output": "cafe"}))


def test_every_call_of_the_task_is_in_the_key() -> None:
    one = [build_messages(ITEM, RELEVANCE)]
    assert cache_key(JUDGE, ITEM, one, 0) != cache_key(JUDGE, ITEM, one * 2, 0)


def scored(dimension: str, score: float, **extra: Any) -> CellSample:
    result = SampleResult(
        judge="j",
        sample=1,
        score=score,
        reasoning="Relevant.",
        attempts=2,
        prompt_tokens=120,
        completion_tokens=15,
        cost_usd=0.002,
    )
    return CellSample(dimension=dimension, result=result, **extra)


def test_only_successful_judge_calls_are_kept() -> None:
    judged = [scored("relevance", 4), scored("accuracy", 3)]
    assert answer_to_keep(judged) == tuple(judged)
    failed = SampleResult(judge="j", sample=1, error="503", error_kind="server_error")
    # One dimension failed: the call is asked again next time, so nothing is kept.
    assert answer_to_keep([judged[0], CellSample(dimension="accuracy", result=failed)]) is None
    cached = judged[0].model_copy(
        update={"result": judged[0].result.model_copy(update={"cached": True})}
    )
    assert answer_to_keep([cached]) is None


def test_a_hit_is_the_stored_answer_marked_cached_and_free() -> None:
    pair = PairJudgment(4, 2, 3, 3)
    (sample,) = cached_samples([scored("relevance", 2.0, pair=pair)], JUDGE, 2)
    assert sample.pair == pair and sample.dimension == "relevance"
    assert sample.result.model_dump() == {
        "judge": JUDGE.name,
        "sample": 2,
        "score": 2.0,
        "error": None,
        "error_kind": None,
        "reasoning": "Relevant.",
        "vote": None,
        "attempts": 0,
        "latency_ms": 0.0,
        "prompt_tokens": 120,
        "completion_tokens": 15,
        "cost_usd": 0.0,
        "cached": True,
    }
