"""A provider batch's output and error lines, read as a live call's answers and errors are
(docs/batch-api.md): the replies at the judge's batch price, or the error a live call with
the same HTTP status would have raised, and a judge call that answers from them in order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jury.errors import JudgeCallError, PermanentJudgeError, TransientJudgeError
from jury.schemas.batch import Judge
from jury.schemas.provider_batches import batch_prices
from jury.worker.calls.usage import checked_usage


@dataclass(frozen=True)
class BatchReply:
    """A line of a provider batch's output, in the shape of worker.llm_client.LLMReply."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    latency_ms: float = 0.0


def token_prices(judge: Judge) -> tuple[float, float]:
    """(input, output) USD per token at the judge's batch price; 0 where unknown."""
    live: tuple[float, float] | None = None
    if judge.input_cost_per_token is not None or judge.output_cost_per_token is not None:
        live = (judge.input_cost_per_token or 0.0, judge.output_cost_per_token or 0.0)
    import litellm  # the worker has it loaded already

    entry = litellm.model_cost.get(judge.model) or litellm.model_cost.get(
        judge.model.split("/", 1)[-1]
    )
    if live is None and isinstance(entry, dict) and "input_cost_per_token" in entry:
        live = (float(entry["input_cost_per_token"]), float(entry.get("output_cost_per_token", 0)))
    return batch_prices(judge, live, entry if isinstance(entry, dict) else None) or (0.0, 0.0)


def _line_error(line: dict[str, Any]) -> JudgeCallError:
    response = line.get("response") or {}
    status = int(response.get("status_code") or 0)
    body = response.get("body") or {}
    error = line.get("error") or (body.get("error") if isinstance(body, dict) else None) or {}
    message = f"batch line {status or ''} {error.get('code') or ''}: {error.get('message') or ''}"
    message = message[:500]
    if status == 429:
        return TransientJudgeError(message, kind="rate_limited")
    if status in (401, 403):
        return PermanentJudgeError(message, kind="auth")
    if status == 404:
        return PermanentJudgeError(message, kind="not_found")
    if 400 <= status < 500 and status not in (408, 409):
        return PermanentJudgeError(message, kind="bad_request")
    if status >= 500:
        return TransientJudgeError(message, kind="server_error")
    return TransientJudgeError(message, kind="provider_error")


def read_line(
    line: dict[str, Any], messages: list[dict[str, str]], prices: tuple[float, float]
) -> BatchReply | JudgeCallError:
    """One output or error line: the reply, or the error a live call would have raised."""
    response = line.get("response") or {}
    body = response.get("body")
    if line.get("error") or int(response.get("status_code") or 0) != 200 or not body:
        return _line_error(line)
    try:
        text = body["choices"][0]["message"]["content"] or ""
        prompt, completion = checked_usage(body.get("usage") or {}, messages, text)
    except (KeyError, IndexError, TypeError) as exc:
        return TransientJudgeError(f"malformed batch line: {exc}", kind="provider_error")
    except JudgeCallError as exc:
        return exc
    cost = prompt * prices[0] + completion * prices[1]
    return BatchReply(text, prompt, completion, cost)


class Recorded:
    """A judge call that answers from the provider batch's lines, in the task's call order."""

    def __init__(self, replies: Sequence[BatchReply | JudgeCallError]) -> None:
        self.replies = list(replies)
        self.next = 0

    async def __call__(self, judge: Judge, messages: list[dict[str, str]]) -> BatchReply:
        reply = self.replies[min(self.next, len(self.replies) - 1)]
        self.next += 1
        if isinstance(reply, JudgeCallError):
            raise reply
        return reply


def ended_without(status: str) -> JudgeCallError:
    return TransientJudgeError(
        f"the provider batch ended ({status}) without answering this request",
        kind="batch_" + status,
    )
