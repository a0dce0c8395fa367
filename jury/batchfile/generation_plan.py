"""The plan of a batch's `candidates:`: the generation calls before any judging, and what
their outputs add to the judges' prompts (at planning time the outputs do not exist yet)."""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

from jury.batchfile.model_catalog import model_prices
from jury.schemas.batch import BatchConfig
from jury.schemas.candidates import LLMCandidate

CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class GenerationPlan:
    candidate: str
    target: str  # the model, or the endpoint's URL
    calls: int
    prompt_tokens: int
    # At most: every answer as long as the candidate's max_tokens allows.
    completion_tokens: int
    # None: a model LiteLLM does not price, or an HTTP endpoint (its price is not jury's to know)
    cost_usd: float | None
    is_llm: bool


def judged_items_per_input(config: BatchConfig) -> int:
    """How many judged items one input becomes: one, or a pair item per pair of 3+ candidates."""
    count = len(config.candidates)
    return comb(count, 2) if count >= 3 else 1


def plan_generation(
    config: BatchConfig, n_items: int, item_text_chars: int
) -> list[GenerationPlan]:
    """A call per (input, candidate). `n_items`, `item_text_chars`: the judged items (pair
    items, with 3+ candidates) and their text, outputs still empty."""
    per_input = judged_items_per_input(config)
    inputs = n_items // per_input
    input_chars = item_text_chars // per_input
    plans = []
    for candidate in config.candidates:
        if not isinstance(candidate, LLMCandidate):
            plans.append(GenerationPlan(candidate.name, candidate.url, inputs, 0, 0, None, False))
            continue
        prompt = (input_chars + inputs * len(candidate.system or "")) // CHARS_PER_TOKEN
        completion = inputs * candidate.max_tokens
        prices = model_prices(candidate.model)
        cost = None if prices is None else prompt * prices[0] + completion * prices[1]
        plans.append(
            GenerationPlan(candidate.name, candidate.model, inputs, prompt, completion, cost, True)
        )
    return plans


def generated_output_chars(config: BatchConfig, n_items: int) -> int:
    """What the generated outputs add to the judged items' text, at most: each judged item
    shows one output (one candidate) or two (a pair), each as long as max_tokens allows
    (an HTTP endpoint's answer counted as 1,000 tokens)."""
    if not config.candidates:
        return 0
    longest = max(c.max_tokens if isinstance(c, LLMCandidate) else 1000 for c in config.candidates)
    shown = 1 if len(config.candidates) == 1 else 2
    return n_items * shown * longest * CHARS_PER_TOKEN
