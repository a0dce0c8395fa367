"""Usage and cost a provider reports, checked before jury counts them: pure functions.

A token count that is negative, fractional, not a number or absurd (over a billion tokens
for one call) is the provider's error: the reply is refused as a transient `bad_usage`
failure (retried like a garbled answer), so no sample is stored with a count, and no budget
with a cost, that cannot be true. A reply with no usage at all (some local servers) is
counted conservatively: a token for every 3 characters of the prompt and of the answer,
rounded up; a judge's own `input_cost_per_token` prices the estimate (a model LiteLLM prices
is priced by LiteLLM, from what the provider reported). A cost is never negative or
infinite: the budget meter only ever goes up.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from jury.errors import TransientJudgeError

MAX_TOKENS_PER_CALL = 1_000_000_000
CHARS_PER_ESTIMATED_TOKEN = 3
BAD_USAGE = "bad_usage"


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TransientJudgeError(
            f"the provider reported {name} = {str(value)[:40]!r}, not a token count",
            kind=BAD_USAGE,
        )
    if not math.isfinite(value) or value != int(value) or value < 0:
        raise TransientJudgeError(
            f"the provider reported {name} = {value!r}: a token count is a whole number >= 0",
            kind=BAD_USAGE,
        )
    if value > MAX_TOKENS_PER_CALL:
        raise TransientJudgeError(
            f"the provider reported {name} = {int(value):,}, more than any call can use",
            kind=BAD_USAGE,
        )
    return int(value)


def estimated_tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_ESTIMATED_TOKEN)


def checked_usage(usage: Any, messages: Sequence[dict[str, str]], answer: str) -> tuple[int, int]:
    """(prompt tokens, completion tokens) of one reply, from its `usage` object (or dict);
    estimated when the provider reported none (LiteLLM then shows zeros); raises
    TransientJudgeError(kind="bad_usage") when what it reported cannot be true."""

    def read(name: str) -> Any:
        return usage.get(name) if isinstance(usage, dict) else getattr(usage, name, None)

    prompt, completion = read("prompt_tokens"), read("completion_tokens")
    if not prompt and not completion:  # None, or the zeros LiteLLM fills in
        prompt_chars = sum(len(m.get("content") or "") for m in messages)
        return estimated_tokens(prompt_chars), estimated_tokens(len(answer))
    return _count(prompt or 0, "prompt_tokens"), _count(completion or 0, "completion_tokens")


def checked_cost(cost: float) -> float:
    """A reply's cost in US dollars: finite and never below zero."""
    if not math.isfinite(cost) or cost < 0:
        raise TransientJudgeError(
            f"the reply's cost came out as {cost!r} USD, which cannot be true", kind=BAD_USAGE
        )
    return cost
