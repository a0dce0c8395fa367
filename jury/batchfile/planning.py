"""The plan of a batch: calls per judge, estimated tokens and cost."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jury.batchfile.generation_plan import (
    GenerationPlan,
    generated_output_chars,
    plan_generation,
)
from jury.batchfile.model_catalog import model_prices, price_map
from jury.schemas.adaptive import first_round_panel
from jury.schemas.batch import BatchConfig, Judge
from jury.schemas.calls import calls_per_task
from jury.schemas.provider_batches import batch_prices

# Characters per token, and the fixed part of every prompt (system message, instructions).
CHARS_PER_TOKEN = 4
PROMPT_OVERHEAD_CHARS = 1100
# A JSON score with one or two sentences of reasoning.
EXPECTED_COMPLETION_TOKENS = 60


@dataclass(frozen=True)
class JudgePlan:
    judge: str
    model: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None  # None: the model's price is unknown
    # Through the provider's Batch API (docs/batch-api.md): what the same calls cost live.
    batch_api: bool = False
    live_cost_usd: float | None = None

    @property
    def priced(self) -> bool:
        return self.cost_usd is not None


@dataclass(frozen=True)
class BatchPlan:
    n_items: int
    n_dimensions: int
    n_cells: int
    judges: list[JudgePlan]
    # Adaptive batches: the calls of every cell's first round (the judges' plans are caps).
    first_round_calls: int | None = None
    # With `candidates:`: the calls that write the outputs, before any judging.
    generation: list[GenerationPlan] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return sum(j.calls for j in self.judges)

    @property
    def cost_usd(self) -> float | None:
        costs = [j.cost_usd for j in self.judges]
        costs += [g.cost_usd for g in self.generation if g.is_llm]
        return None if any(c is None for c in costs) else sum(c or 0.0 for c in costs)

    @property
    def batch_api_saving_usd(self) -> float:
        """What the batch judges save against the same calls made live."""
        return sum(
            (j.live_cost_usd or 0.0) - (j.cost_usd or 0.0)
            for j in self.judges
            if j.batch_api and j.cost_usd is not None
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "n_items": self.n_items,
            "n_dimensions": self.n_dimensions,
            "n_cells": self.n_cells,
            "calls": self.calls,
            "estimated_cost_usd": self.cost_usd,
            "first_round_calls": self.first_round_calls,
            "batch_api_saving_usd": self.batch_api_saving_usd,
            "unpriced_judges": [j.judge for j in self.judges if not j.priced],
            "judges": [{**j.__dict__, "priced": j.priced} for j in self.judges],
            "generation": [g.__dict__ for g in self.generation],
        }


def judge_prices(judge: Judge) -> tuple[float, float] | None:
    """(input, output) USD per token: the judge's own, else LiteLLM's; None if unknown."""
    if judge.heuristic is not None:
        return 0.0, 0.0  # no LLM call
    if judge.input_cost_per_token is not None or judge.output_cost_per_token is not None:
        return judge.input_cost_per_token or 0.0, judge.output_cost_per_token or 0.0
    return model_prices(judge.model)


def budget_problems(config: BatchConfig) -> list[str]:
    """With max_cost_usd, every enabled judge needs a known price, or the budget would count
    its calls as free and protect nothing."""
    if config.max_cost_usd is None:
        return []
    return [
        f"judges[{index}]: max_cost_usd is set, but the price of {judge.model!r} is unknown "
        "(it is not in LiteLLM's price map), so the budget would count its calls as free. "
        "Declare it with input_cost_per_token and output_cost_per_token (USD per token; 0 for "
        "a free local model), or remove max_cost_usd"
        for index, judge in enumerate(config.judges)
        if judge.enabled and judge_prices(judge) is None
    ]


def plan_batch(
    config: BatchConfig, n_items: int, item_text_chars: int, n_cells: int | None = None
) -> BatchPlan:
    """`n_cells`: the sum over items of the dimensions each is judged on (default: every item
    on the batch's dimensions); with per-item criteria, the rubric and item text are counted
    as if each item had the mean number of dimensions."""
    dims = config.dimensions
    generation = plan_generation(config, n_items, item_text_chars)
    item_text_chars += generated_output_chars(config, n_items)
    if n_cells is None:
        n_cells = n_items * len(config.default_dimensions)
    # Dimensions per item, on average: all of them unless items chose their own.
    per_item = n_cells / n_items if n_items else float(len(dims))
    rubric_chars = round(sum(len(d.description or "") for d in dims) * per_item / max(len(dims), 1))
    # A pairwise sample asks twice (both orders), each time with both outputs.
    orders = calls_per_task(config)
    if config.mode == "combined":
        # One prompt per item holds the item once and every rubric; the answer, every score.
        tasks = n_items
        prompt_chars_all_cells = item_text_chars + n_items * (PROMPT_OVERHEAD_CHARS + rubric_chars)
        answer_tokens = round(per_item * EXPECTED_COMPLETION_TOKENS)
    else:
        # Every cell's prompt holds the item once and one dimension's rubric.
        tasks = n_cells
        prompt_chars_all_cells = (
            round(per_item * (item_text_chars + n_items * PROMPT_OVERHEAD_CHARS))
            + n_items * rubric_chars
        )
        answer_tokens = EXPECTED_COMPLETION_TOKENS
    judges = []
    for judge in config.panel:
        calls = tasks * judge.n * orders
        prompt_tokens = orders * judge.n * prompt_chars_all_cells // CHARS_PER_TOKEN
        completion_tokens = calls * answer_tokens
        if judge.heuristic is not None:  # measured by the worker: no call, no tokens
            calls = prompt_tokens = completion_tokens = 0
        prices = judge_prices(judge)
        cost = None if prices is None else prompt_tokens * prices[0] + completion_tokens * prices[1]
        live_cost = cost
        if judge.batch_api:
            entry = price_map().get(judge.model) or price_map().get(judge.model.split("/", 1)[-1])
            batch = batch_prices(judge, prices, entry if isinstance(entry, dict) else None)
            cost = (
                None if batch is None else prompt_tokens * batch[0] + completion_tokens * batch[1]
            )
        judges.append(
            JudgePlan(
                judge.name,
                judge.model,
                calls,
                prompt_tokens,
                completion_tokens,
                cost,
                judge.batch_api,
                live_cost,
            )
        )
    first = None
    if config.adaptive is not None:
        first = tasks * orders * sum(j.n for j in first_round_panel(config))
    return BatchPlan(n_items, len(config.default_dimensions), n_cells, judges, first, generation)
