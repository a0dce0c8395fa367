"""Batch API pieces without processes: prices, the judge option, the plan's saving, and how a
provider batch's output and error lines become replies or jury's error kinds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from jury.batchfile.planning import plan_batch
from jury.errors import JudgeCallError
from jury.schemas.batch import BatchConfig, Judge
from jury.schemas.provider_batches import batch_prices, custom_id
from jury.store.engine import session_factory
from jury.store.models import BatchRow
from jury.store.provider_batches import claim_requests, mark_done, record_requests
from jury.worker.calls.batch_lines import BatchReply, read_line

MESSAGES = [{"role": "user", "content": "x" * 40}]


def test_batch_prices_half_of_declared_unless_the_price_map_knows() -> None:
    judge = Judge(model="openai/gpt-4o-mini", batch_api=True)
    assert batch_prices(judge, (2e-6, 4e-6), None) == (1e-6, 2e-6)
    entry = {"input_cost_per_token_batches": 7e-8, "output_cost_per_token_batches": 3e-7}
    assert batch_prices(judge, (2e-6, 4e-6), entry) == (7e-8, 3e-7)
    declared = Judge(
        model="openai/x", api_base="http://h/v1", input_cost_per_token=1e-6, batch_price_factor=0.4
    )
    # Declared prices win over the map's batch prices.
    assert batch_prices(declared, (1e-6, 0.0), entry) == (pytest.approx(4e-7), 0.0)
    assert batch_prices(judge, None, None) is None


def test_batch_api_needs_an_openai_format_endpoint() -> None:
    with pytest.raises(ValidationError, match="OpenAI-format endpoint"):
        Judge(model="anthropic/claude-3-5-haiku-20241022", batch_api=True)
    assert Judge(model="anthropic/x", api_base="http://gw/v1", batch_api=True).batch_api


def test_custom_id_names_the_sample() -> None:
    assert custom_id("b1", "item-3", "tone", "gpt", 2, 1) == "b1/item-3/tone/gpt/2/1"


def test_dry_run_plan_shows_the_batch_saving() -> None:
    prices: dict[str, Any] = {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}
    config = BatchConfig.model_validate(
        {
            "judges": [
                {"model": "openai/a", "api_base": "http://s/v1", "batch_api": True, **prices},
                {"model": "openai/b", "api_base": "http://s/v1", **prices},
            ],
            "dimensions": ["relevance"],
        }
    )
    plan = plan_batch(config, 100, 100 * 500)
    batched, live = plan.judges
    assert live.cost_usd is not None
    assert batched.batch_api and batched.cost_usd == pytest.approx(live.cost_usd / 2)
    assert batched.live_cost_usd == pytest.approx(live.cost_usd)
    assert plan.batch_api_saving_usd == pytest.approx(live.cost_usd / 2)
    assert plan.as_dict()["batch_api_saving_usd"] == pytest.approx(live.cost_usd / 2)


def _line(status: int, body: Any, error: Any = None) -> dict[str, Any]:
    return {"custom_id": "c", "response": {"status_code": status, "body": body}, "error": error}


def test_an_output_line_is_a_reply_at_batch_price() -> None:
    body = {
        "choices": [{"message": {"content": '{"score": 4}'}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10},
    }
    reply = read_line(_line(200, body), MESSAGES, (1e-6, 2e-6))
    assert isinstance(reply, BatchReply)
    assert reply.text == '{"score": 4}' and reply.cost_usd == pytest.approx(100e-6 + 20e-6)


@pytest.mark.parametrize(
    ("line", "kind", "transient"),
    [
        (_line(500, {"error": {"message": "boom"}}), "server_error", True),
        (_line(429, {"error": {"message": "slow down"}}), "rate_limited", True),
        (_line(400, {"error": {"message": "bad"}}), "bad_request", False),
        (_line(401, {"error": {"message": "key"}}), "auth", False),
        (_line(404, {"error": {"message": "model"}}), "not_found", False),
        (
            {"custom_id": "c", "response": None, "error": {"code": "x", "message": "y"}},
            "provider_error",
            True,
        ),
        (_line(200, {"choices": []}), "provider_error", True),
    ],
)
def test_error_lines_take_the_live_error_kinds(
    line: dict[str, Any], kind: str, transient: bool
) -> None:
    error = read_line(line, MESSAGES, (0.0, 0.0))
    assert isinstance(error, JudgeCallError)
    assert (error.kind, error.transient) == (kind, transient)


def test_requests_are_stored_once_claimed_whole_and_asked_again_on_resume(tmp_path: Path) -> None:
    sessions = session_factory(f"sqlite:///{tmp_path / 'jury.db'}")
    with sessions.begin() as session:
        session.add(BatchRow(id="b", name="n", config={}, status="running"))
    key = {"batch_id": "b", "item_id": "i", "dimension": "d", "judge": "j", "sample": 0}
    rows = [
        {**key, "custom_id": custom_id("b", "i", "d", "j", 0, c), "call": c, "messages": []}
        for c in (0, 1)
    ]
    assert record_requests(sessions, rows) == 2
    assert record_requests(sessions, rows) == 0  # a duplicate delivery
    intent = {
        "id": "p1",
        "batch_id": "b",
        "judge": "j",
        "model": "m",
        "api_base": "",
        "key_env": "",
    }
    claimed = claim_requests(sessions, intent, 1)
    assert claimed is not None and len(claimed[1]) == 2  # a pair's two calls stay together
    assert record_requests(sessions, rows) == 0  # in a provider batch: left alone
    assert mark_done(sessions, "p1", [r.id for r in claimed[1]]) == 2
    assert mark_done(sessions, "p1", [r.id for r in claimed[1]]) == 0  # a second poller
    assert record_requests(sessions, rows) == 2  # `jury resume`: asked again


@pytest.mark.parametrize("dimensions", [["relevance"], ["relevance", "tone", "accuracy"]])
def test_a_batch_line_is_the_call_a_live_task_makes(
    monkeypatch: pytest.MonkeyPatch, dimensions: list[str]
) -> None:
    """Whatever a live call of a task sends besides the model (temperature, a combined call's
    larger max_tokens, JSON mode) its provider batch line sends too: the same call, which is
    why the result cache may serve either's answer to the other."""
    import asyncio
    import json

    from jury.schemas.batch import Dimension
    from jury.schemas.calls import CallSpec
    from jury.worker.calls import llm_client
    from jury.worker.calls.batch_client import Endpoint, request_line
    from jury.worker.calls.provider_batches import ProviderBatches
    from jury.worker.judging.judge_calls import RetryPolicy, judge_call

    sent: list[dict[str, Any]] = []

    async def acompletion(**kwargs: Any) -> Any:
        sent.append(kwargs)
        raise RuntimeError("no network in a unit test")

    monkeypatch.setattr(llm_client.litellm, "acompletion", acompletion)
    judge = Judge(
        model="openai/gpt-4o-mini",
        api_base="http://127.0.0.1:9/v1",
        batch_api=True,
        temperature=0.3,
        max_tokens=300,
    )
    scored = [Dimension(name=name, description=f"Is it {name}?") for name in dimensions]
    asyncio.run(
        judge_call(judge, scored, [None], [MESSAGES], 0, llm_client.complete, RetryPolicy(1))
    )
    (live,) = sent
    (params,) = ProviderBatches._line_params(judge, [CallSpec(tuple(dimensions))])
    line = json.loads(request_line("c", Endpoint.of(judge), params, MESSAGES))
    body = line["body"]
    assert body.pop("model") == "gpt-4o-mini" and body.pop("messages") == MESSAGES
    assert body == {k: live[k] for k in body} and set(body) >= {"temperature", "max_tokens"}
    assert body["max_tokens"] == 300 * len(dimensions)
    assert body.get("response_format") == live.get("response_format") == {"type": "json_object"}
