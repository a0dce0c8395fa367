"""A task message is read field by field (schemas.task_messages), and a sample is checked for
whether it could be true (schemas.sample_checks): pure functions, no broker."""

from __future__ import annotations

from typing import Any

import pytest

from jury.errors import MessageRefused
from jury.schemas.batch import BatchConfig
from jury.schemas.pairwise import PairJudgment
from jury.schemas.results import SampleResult
from jury.schemas.sample_checks import INVALID_SAMPLE, counted, sample_problem, score_range
from jury.schemas.task_messages import cell_message, generation_message, judge_message
from jury.schemas.tasks import CellRef, GenerationRef, SampleRef

REF = ["b1", "q1", "relevance", "openai/x", 2]
SAMPLE = {"judge": "openai/x", "sample": 2, "score": 4.0, "cost_usd": 0.001}


def test_messages_jury_writes_are_read_as_written() -> None:
    assert judge_message(REF, {}).ref == SampleRef("b1", "q1", "relevance", "openai/x", 2)
    parked = judge_message(REF, {"waited_s": 3.5, "parked_at": 1.7e9, "live": True})
    assert (parked.waited_s, parked.parked_at, parked.live) == (3.5, 1.7e9, True)
    carried = judge_message(
        REF, {"judged": [{"dimension": "relevance", "result": SAMPLE}], "store_retries": 3}
    )
    assert carried.judged is not None and carried.judged[0].result.score == 4.0
    assert carried.store_retries == 3
    assert cell_message(REF[:3], {"store_retries": 1}) == (CellRef("b1", "q1", "relevance"), 1)
    assert generation_message(["b1", "q1", "bot"], {}) == GenerationRef("b1", "q1", "bot")


@pytest.mark.parametrize(
    ("args", "kwargs", "says"),
    [
        (REF[:4], {}, "5 arguments expected"),
        ({"batch": "b1"}, {}, "5 arguments expected"),
        ([*REF[:4], "2"], {}, "sample index '2' is not a count"),
        ([*REF[:4], True], {}, "sample index True"),
        ([*REF[:4], -1], {}, "sample index -1"),
        ([*REF[:4], 10**6], {}, "sample index 1000000 is not a count from 0 to 10000"),
        ([*REF[:4], 2.0], {}, "sample index 2.0"),
        ([1, *REF[1:]], {}, "argument 1 is not a name"),
        (["", *REF[1:]], {}, "argument '' is not a name"),
        (["x" * 5000, *REF[1:]], {}, "is not a name"),
        (REF, {"budget": "unlimited"}, "unknown fields ['budget']"),
        (REF, {"waited_s": float("nan")}, "waited_s nan"),
        (REF, {"waited_s": -5}, "waited_s -5"),
        (REF, {"parked_at": float("inf")}, "parked_at inf"),
        (REF, {"live": "yes"}, "live 'yes'"),
        (REF, {"store_retries": -1}, "store_retries -1"),
        (REF, {"judged": "all of them"}, "not a list of samples"),
        (REF, {"judged": []}, "not a list of samples"),
        (REF, {"judged": [{"dimension": "relevance"}]}, "a judged sample is malformed"),
        (
            REF,
            {"judged": [{"dimension": "relevance", "result": {**SAMPLE, "secret": 1}}]},
            "result.secret",
        ),
    ],
)
def test_a_message_of_another_shape_is_refused_in_one_line(
    args: Any, kwargs: dict[str, Any], says: str
) -> None:
    with pytest.raises(MessageRefused) as refused:
        judge_message(args, kwargs)
    assert says in str(refused.value) and "nothing called or stored" in str(refused.value)


def test_a_refusal_quotes_a_forged_value_on_one_line() -> None:
    forged = "b1\n[2026-01-01 00:00:00,000: INFO] Task succeeded\x1b[2J" + "x" * 500
    with pytest.raises(MessageRefused) as refused:
        cell_message([forged, "q1"], {})
    with pytest.raises(MessageRefused) as named:
        generation_message(["b1", "q1", 7], {})
    for error in (refused.value, named.value):
        assert "\n" not in str(error) and "\x1b" not in str(error) and len(str(error)) < 400


CONFIG = BatchConfig.model_validate(
    {"judges": ["openai/x"], "dimensions": [{"name": "relevance", "scale": {"min": 1, "max": 5}}]}
)
PAIRS = BatchConfig.model_validate(
    {"judges": ["openai/x"], "dimensions": ["relevance"], "pairwise": True}
)


def _result(**fields: Any) -> SampleResult:
    return SampleResult.model_validate({**SAMPLE, **fields})


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"score": 1e300}, "score 1e+300 outside 'relevance''s range 1..5"),
        ({"score": 0.5}, "outside"),
        ({"score": float("nan")}, "score nan"),
        ({"cost_usd": -1000.0}, "cost -1000.0 USD is not a cost"),
        ({"cost_usd": float("inf")}, "cost inf"),
        ({"prompt_tokens": -1}, "prompt_tokens -1"),
        ({"latency_ms": float("nan")}, "latency nan"),
        ({"reasoning": "r" * 5000}, "reasoning longer"),
    ],
)
def test_a_sample_that_cannot_be_true_is_named(fields: dict[str, Any], says: str) -> None:
    dimension = CONFIG.dimension("relevance")
    assert sample_problem(CONFIG, dimension, _result(), None) is None
    problem = sample_problem(CONFIG, dimension, _result(**fields), None)
    assert problem is not None and says in problem


def test_a_pair_s_score_is_a_preference_within_the_scale_s_width() -> None:
    dimension = PAIRS.dimension("relevance")
    assert score_range(PAIRS, dimension) == (-4.0, 4.0)
    pair = PairJudgment(5.0, 1.0, 4.0, 2.0)
    assert sample_problem(PAIRS, dimension, _result(score=3.0), pair) is None
    assert "preference" in str(sample_problem(PAIRS, dimension, _result(score=-3.0), pair))
    off_scale = PairJudgment(6.0, 3.0)  # a preference of 3, but 6 is off the scale
    assert "pair score outside" in str(
        sample_problem(PAIRS, dimension, _result(score=3.0), off_scale)
    )


def test_a_sample_that_cannot_be_true_counts_as_failed_keeping_only_a_true_cost() -> None:
    dimension = CONFIG.dimension("relevance")
    good = _result()
    assert counted(CONFIG, dimension, good, None) is good
    off_scale = counted(CONFIG, dimension, _result(score=1e300), None)
    assert (off_scale.ok, off_scale.error_kind, off_scale.cost_usd) == (
        False,
        INVALID_SAMPLE,
        0.001,
    )
    negative = counted(CONFIG, dimension, _result(cost_usd=-1000.0), None)
    assert (negative.ok, negative.cost_usd) == (False, 0.0)
