"""worker.judging.judge_call for the other call specs: a pair (both orders, or one) and
combined calls (every dimension), with jury's retry policy, driven by a fake `call`."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from jury.errors import PermanentJudgeError, TransientJudgeError
from jury.schemas.batch import Dimension, Item, Judge, Scale
from jury.schemas.calls import Order
from jury.schemas.results import CellSample
from jury.worker.judging.judge_calls import CallTally, RetryPolicy
from tests.unit.worker.test_judging import FakeCall, Reply, Sleeps, judge_samples, policy

JUDGE = Judge(model="openai/gpt-4o-mini", name="mini", n=2)
RELEVANCE = Dimension.model_validate("relevance")
TONE = Dimension(name="tone", description="Is it kind?", scale=Scale(min=1, max=10))
PAIR = Item(id="p", input="Q?", output_a="Use the link.", output_b="No idea.")
SINGLE = Item(id="s", input="Q?", output="Use the link.")


def judge_pair_sample(
    judge: Judge,
    dimension: Dimension,
    item: Item,
    sample: int,
    call: FakeCall,
    retry: RetryPolicy,
    sleeps: Sleeps,
) -> CellSample:
    (judged,) = judge_samples(judge, [dimension], item, sample, call, retry, sleeps, ("AB", "BA"))
    return judged


def judge_all_dimensions(
    judge: Judge,
    dimensions: list[Dimension],
    item: Item,
    sample: int,
    call: FakeCall,
    retry: RetryPolicy,
    sleeps: Sleeps,
) -> list[CellSample]:
    orders: Sequence[Order | None] = ("AB", "BA") if item.is_pair else (None,)
    return judge_samples(judge, dimensions, item, sample, call, retry, sleeps, orders)


def pair_reply(first: float, second: float) -> Reply:
    return Reply(json.dumps({"score_1": first, "score_2": second, "reasoning": "r"}))


def test_pair_sample_asks_in_both_orders() -> None:
    # A first: A 5, B 3. B first: B 4, A 4 → preference ((5-3) + (4-4)) / 2 = 1.
    call = FakeCall([pair_reply(5, 3), pair_reply(4, 4)])
    judged = judge_pair_sample(JUDGE, RELEVANCE, PAIR, 1, call, policy(), Sleeps())
    assert judged.result.score == 1.0 and judged.result.sample == 1
    assert judged.pair is not None
    assert tuple(judged.pair) == (5.0, 3.0, 4.0, 4.0)
    first, second = (messages[1]["content"] for _, messages in call.calls)
    assert first.index("Use the link.") < first.index("No idea.")
    assert second.index("No idea.") < second.index("Use the link.")
    # Both calls' usage is the sample's.
    assert (judged.result.attempts, judged.result.prompt_tokens) == (2, 200)
    assert judged.result.cost_usd == pytest.approx(0.002)


def test_pair_sample_fails_whole_when_one_order_fails() -> None:
    call = FakeCall([pair_reply(5, 3), PermanentJudgeError("no such model", kind="not_found")])
    judged = judge_pair_sample(JUDGE, RELEVANCE, PAIR, 0, call, policy(), Sleeps())
    assert judged.result.score is None and judged.pair is None
    assert judged.result.error_kind == "not_found"
    assert judged.result.attempts == 2 and judged.result.prompt_tokens == 100


def test_pair_sample_retries_an_unparseable_order() -> None:
    sleeps = Sleeps()
    call = FakeCall([Reply("I like the first"), pair_reply(4, 2), pair_reply(2, 4)])
    judged = judge_pair_sample(JUDGE, RELEVANCE, PAIR, 0, call, policy(), sleeps)
    assert judged.result.score == 2.0 and judged.result.attempts == 3 and len(sleeps) == 1


def test_pair_shown_once_asks_once() -> None:
    call = FakeCall([pair_reply(5, 3)])
    (judged,) = judge_samples(JUDGE, [RELEVANCE], PAIR, 0, call, policy(), Sleeps(), ("AB",))
    assert len(call.calls) == 1
    assert judged.result.score == 2.0 and judged.pair is not None
    assert tuple(judged.pair) == (5.0, 3.0, None, None)
    assert judged.pair.first_position_advantage is None


def combined_reply(scores: dict[str, object], prompt_tokens: int = 101) -> Reply:
    return Reply(json.dumps({"scores": scores}), prompt_tokens=prompt_tokens, completion_tokens=7)


def test_combined_call_stores_a_sample_per_dimension_and_splits_its_usage() -> None:
    call = FakeCall([combined_reply({"relevance": {"score": 4}, "tone": {"score": 9}})])
    judged = judge_all_dimensions(JUDGE, [RELEVANCE, TONE], SINGLE, 0, call, policy(), Sleeps())
    assert len(call.calls) == 1
    assert call.calls[0][0].max_tokens == 2 * JUDGE.max_tokens  # room for every dimension
    assert [(j.dimension, j.result.score) for j in judged] == [("relevance", 4.0), ("tone", 9.0)]
    assert [j.result.prompt_tokens for j in judged] == [51, 50]  # 101 split, remainder first
    assert [j.result.completion_tokens for j in judged] == [4, 3]
    assert sum(j.result.cost_usd for j in judged) == pytest.approx(0.001)
    assert {j.result.latency_ms for j in judged} == {250.0}


def test_combined_call_retries_a_partial_answer_then_keeps_the_best() -> None:
    partial = combined_reply({"relevance": 4})
    call = FakeCall([partial, Reply("garbage"), partial])
    judged = judge_all_dimensions(
        JUDGE, [RELEVANCE, TONE], SINGLE, 0, call, policy(max_attempts=3), Sleeps()
    )
    assert len(call.calls) == 3
    relevance, tone = judged
    assert relevance.result.score == 4.0 and relevance.result.attempts == 3
    assert tone.result.score is None and tone.result.error_kind == "unparseable"


def test_combined_call_failing_fails_every_dimension() -> None:
    call = FakeCall([TransientJudgeError("timed out", kind="timeout")])
    judged = judge_all_dimensions(
        JUDGE, [RELEVANCE, TONE], SINGLE, 0, call, policy(max_attempts=2), Sleeps()
    )
    assert [j.result.error_kind for j in judged] == ["timeout", "timeout"]
    assert all(j.result.attempts == 2 for j in judged)


def test_combined_pairwise_asks_twice_for_every_dimension() -> None:
    call = FakeCall(
        [
            combined_reply({"relevance": {"score_1": 5, "score_2": 2}, "tone": [1]}),
            combined_reply({"relevance": {"score_1": 3, "score_2": 4}, "tone": {}}),
        ]
    )
    judged = judge_all_dimensions(
        JUDGE, [RELEVANCE, TONE], PAIR, 0, call, policy(max_attempts=1), Sleeps()
    )
    relevance, tone = judged
    # A first: A 5, B 2 (+3); B first: B 3, A 4 (+1) → +2.
    assert relevance.result.score == 2.0 and relevance.pair is not None
    assert tuple(relevance.pair) == (5.0, 2.0, 4.0, 3.0)
    assert tone.result.score is None and tone.pair is None


def test_call_tally_shares_add_up() -> None:
    tally = CallTally(attempts=2, prompt_tokens=10, completion_tokens=5, cost_usd=0.3)
    shares = [tally.share(i, 3) for i in range(3)]
    assert sum(int(s["prompt_tokens"]) for s in shares) == 10
    assert sum(int(s["completion_tokens"]) for s in shares) == 5
    assert sum(float(s["cost_usd"]) for s in shares) == pytest.approx(0.3)
    assert {s["attempts"] for s in shares} == {2}
