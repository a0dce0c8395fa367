"""producer.planning: calls per judge and estimated cost, without importing litellm."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jury.batchfile.model_catalog import model_prices, model_problem, price_map
from jury.batchfile.planning import CHARS_PER_TOKEN, EXPECTED_COMPLETION_TOKENS, plan_batch
from jury.schemas.batch import BatchConfig

ROOT = Path(__file__).resolve().parents[3]


def batch(**overrides: Any) -> BatchConfig:
    data: dict[str, Any] = {
        "judges": [
            {"model": "openai/gpt-4o-mini", "n": 3},
            {"model": "openai/balanced", "n": 2},
            {"model": "openai/lenient", "n": 5, "enabled": False},
        ],
        "dimensions": ["relevance", "helpfulness", {"name": "tone", "description": "Kind?"}],
    }
    data.update(overrides)
    return BatchConfig.model_validate(data)


def test_calls_per_judge_are_items_times_dimensions_times_n() -> None:
    plan = plan_batch(batch(), n_items=7, item_text_chars=7000)
    assert plan.n_items == 7
    assert plan.n_dimensions == 3
    assert plan.n_cells == 21
    assert [(j.judge, j.calls) for j in plan.judges] == [
        ("openai/gpt-4o-mini", 7 * 3 * 3),
        ("openai/balanced", 7 * 3 * 2),
    ]  # the disabled judge plans no calls
    assert plan.calls == 7 * 3 * 5
    assert plan.as_dict()["calls"] == plan.calls


def test_token_estimates_scale_with_samples_and_text() -> None:
    small = plan_batch(batch(), n_items=10, item_text_chars=1_000)
    large = plan_batch(batch(), n_items=10, item_text_chars=1_000_000)
    mini_small, balanced_small = small.judges
    mini_large = large.judges[0]
    assert mini_large.prompt_tokens > mini_small.prompt_tokens
    # Each dimension's prompt holds the whole item text once per sample.
    extra_chars = 3 * 3 * (1_000_000 - 1_000)
    assert mini_large.prompt_tokens - mini_small.prompt_tokens == pytest.approx(
        extra_chars / CHARS_PER_TOKEN, abs=2
    )
    assert mini_small.completion_tokens == mini_small.calls * EXPECTED_COMPLETION_TOKENS
    # 3 samples against 2: tokens in proportion (up to integer rounding).
    assert mini_small.prompt_tokens == pytest.approx(balanced_small.prompt_tokens * 1.5, abs=2)


def test_known_model_has_a_cost() -> None:
    prices = model_prices("openai/gpt-4o-mini")
    assert prices is not None
    input_price, output_price = prices
    assert input_price > 0 and output_price > 0
    plan = plan_batch(batch(), n_items=4, item_text_chars=2000)
    mini = plan.judges[0]
    assert mini.model == "openai/gpt-4o-mini"
    assert mini.cost_usd is not None
    assert mini.cost_usd == pytest.approx(
        mini.prompt_tokens * input_price + mini.completion_tokens * output_price
    )


def test_unknown_model_has_no_cost() -> None:
    assert model_prices("openai/balanced") is None
    plan = plan_batch(batch(), n_items=4, item_text_chars=2000)
    balanced = plan.judges[1]
    assert balanced.model == "openai/balanced"
    assert balanced.cost_usd is None
    assert plan.cost_usd is None  # one unknown price makes the total unknown
    assert plan.as_dict()["estimated_cost_usd"] is None


def test_total_cost_when_every_price_is_known() -> None:
    config = batch(judges=[{"model": "openai/gpt-4o-mini", "n": 2}])
    plan = plan_batch(config, n_items=3, item_text_chars=300)
    assert plan.cost_usd is not None
    assert plan.cost_usd == pytest.approx(plan.judges[0].cost_usd or -1)
    assert plan.cost_usd > 0


def test_plan_as_dict_is_json() -> None:
    data = plan_batch(batch(), n_items=2, item_text_chars=100).as_dict()
    assert json.loads(json.dumps(data)) == data
    assert [j["judge"] for j in data["judges"]] == ["openai/gpt-4o-mini", "openai/balanced"]


def test_price_map_is_the_litellm_backup_file() -> None:
    prices = price_map()
    assert "gpt-4o-mini" in prices
    assert "input_cost_per_token" in prices["gpt-4o-mini"]


def test_planning_does_not_import_litellm() -> None:
    script = (
        "import sys\n"
        "from jury.batchfile.model_catalog import model_problem, model_prices\n"
        "from jury.batchfile.planning import plan_batch\n"
        "assert model_problem('nosuchprovider/x') is not None\n"
        "from jury.schemas.batch import BatchConfig\n"
        "config = BatchConfig.model_validate("
        "{'judges': ['openai/gpt-4o-mini'], 'dimensions': ['relevance']})\n"
        "plan = plan_batch(config, 10, 1000)\n"
        "assert plan.judges[0].cost_usd is not None, 'price not found'\n"
        "assert model_prices('openai/gpt-4o-mini') is not None\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'litellm'))\n"
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "model",
    [
        "openai/gpt-4o-mini",
        "anthropic/claude-3-5-sonnet-20241022",
        "hosted_vllm/llama-3",
        "ollama_chat/llama3",
        "openrouter/meta/llama-3",
        "openai/balanced",
        "gpt-4o-mini",
    ],
)
def test_models_litellm_can_route_pass(model: str) -> None:
    assert model_problem(model) is None


@pytest.mark.parametrize(
    ("model", "fragment"),
    [
        ("nosuchprovider/some-model", "unknown provider 'nosuchprovider'"),
        ("my-private-model", "write it as provider/model"),
    ],
)
def test_unknown_judges_are_named(model: str, fragment: str) -> None:
    problem = model_problem(model)
    assert problem is not None and fragment in problem


def test_adaptive_plan_counts_the_first_round_apart_from_the_cap() -> None:
    config = BatchConfig.model_validate(
        {
            "judges": [
                {"model": "openai/a", "n": 3},
                {"model": "openai/b", "n": 2, "reserve": True},
            ],
            "dimensions": ["relevance", "accuracy"],
            "adaptive": {"initial_samples": 1},
        }
    )
    plan = plan_batch(config, n_items=10, item_text_chars=1000)
    assert plan.calls == 10 * 2 * (3 + 2)  # the cap
    assert plan.first_round_calls == 10 * 2 * 1
    assert plan.as_dict()["first_round_calls"] == 20
