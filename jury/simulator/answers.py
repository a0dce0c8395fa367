"""What the judge says and the OpenAI-shaped envelopes around it."""

from __future__ import annotations

import json
import math
import time
import uuid
from typing import Any

# Reasons are persona-agnostic and digit-free, so a lenient score parser that grabs the
# first number in the text cannot mistake the reasoning for the score.
_REASONS: tuple[tuple[float, str], ...] = (
    (0.2, "The output largely fails the rubric and misses what was asked."),
    (0.4, "The output addresses the rubric only partly and has clear gaps."),
    (0.6, "The output meets the rubric adequately but leaves room for improvement."),
    (0.8, "The output satisfies the rubric well with only minor issues."),
    (math.inf, "The output fully satisfies the rubric with no notable issues."),
)

GARBAGE_ANSWERS: tuple[str, ...] = (
    "I cannot decide.",
    "This is a difficult one; I would need more context before grading it.",
    "As a judge I prefer not to give a verdict on this item.",
)


def reasoning_for(score: float, low: float, high: float) -> str:
    position = (score - low) / (high - low)
    return next(reason for bound, reason in _REASONS if position < bound)


def format_score(score: float) -> int | float:
    """Integral scores as ints (`4`, not `4.0`), as a real model would write them."""
    return int(score) if float(score).is_integer() else score


def render_answer(fmt: str, score: float, reasoning: str) -> str:
    """The assistant message text in one of the formats judges are seen to use."""
    shown = format_score(score)
    as_json = json.dumps({"score": shown, "reasoning": reasoning})
    if fmt == "json":
        return as_json
    if fmt == "fenced":
        return f"Here is my assessment of the item.\n```json\n{as_json}\n```"
    if fmt == "tag":
        return f"<Reasoning>{reasoning}</Reasoning><Score>{shown}</Score>"
    if fmt == "plain":
        return f"Reasoning: {reasoning}\nScore: {shown}"
    raise ValueError(f"unknown answer format {fmt!r}")


TRUE_FALSE_WORDS = ("false", "uncertain", "true")
GARBLED_VOTE = "it depends"


def render_asked(
    fmt: str,
    score: float,
    reasoning: str,
    *,
    low: float,
    high: float,
    vote: bool,
    true_false: bool,
    garbled: bool = False,
) -> str:
    """An answer to a prompt that asks more than a score: the pass vote (pass when the score
    reaches the middle of the scale; with `garbled`, a vote that is neither), and a score on
    0..2 written as false, uncertain or true."""
    fields: dict[str, Any] = {}
    if true_false:
        fields["answer"] = TRUE_FALSE_WORDS[int(score)]
    else:
        fields["score"] = format_score(score)
    if vote:
        fields["pass"] = GARBLED_VOTE if garbled else score >= (low + high) / 2
    fields["reasoning"] = reasoning
    if fmt in ("json", "fenced"):
        as_json = json.dumps(fields)
        return as_json if fmt == "json" else f"My assessment:\n```json\n{as_json}\n```"
    lines = [f"Reasoning: {reasoning}"]
    lines.append(f"Answer: {fields['answer']}" if true_false else f"Score: {fields['score']}")
    if vote:
        shown = fields["pass"]
        lines.append(f"Pass: {shown if isinstance(shown, str) else ('yes' if shown else 'no')}")
    return "\n".join(lines)


def estimate_tokens(text: str) -> int:
    # The common four-characters-per-token rule of thumb; exact counts do not matter here.
    return max(1, math.ceil(len(text) / 4))


def chat_completion(model: str, content: str, prompt_text: str) -> dict[str, Any]:
    prompt_tokens = estimate_tokens(prompt_text)
    completion_tokens = estimate_tokens(content)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def error_body(message: str, error_type: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}
