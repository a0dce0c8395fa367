"""Putting every judge call through the cluster-wide rate limiter.

`GatedCall` wraps the LLM call: before it, reserve a slot (sleeping up to the horizon, or
deferring the whole task when its slot lies further ahead); after it, free the in-flight slot
and correct the token estimate from the usage the provider reported; on a 429, start the
shared cool-down that every worker honours.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from schemas.batch import Judge
from schemas.errors import JuryError, TransientJudgeError
from worker.judging import CallJudge, ReplyLike
from worker.ratelimit import COOLING, DEFERRED, Limits, RateLimiter

# A 429 without Retry-After silences the model this long.
DEFAULT_COOL_DOWN_S = 5.0
# Expected answer length, before the usage says: a JSON score and a sentence or two.
EXPECTED_COMPLETION_TOKENS = 100
CHARS_PER_TOKEN = 4


class Deferred(JuryError):
    """The task's first call has no slot within the horizon: retry the task in `countdown_s`."""

    def __init__(self, countdown_s: float) -> None:
        super().__init__(f"no rate-limit slot for {countdown_s:.1f} s: deferring the task")
        self.countdown_s = countdown_s


def rate_key(judge: Judge) -> str:
    """One limit per (api_base, model): the same model behind two servers has two quotas."""
    return hashlib.blake2b(
        f"{judge.api_base or ''}|{judge.model}".encode(), digest_size=8
    ).hexdigest()


def estimate_tokens(judge: Judge, messages: list[dict[str, str]]) -> int:
    prompt = sum(len(m.get("content") or "") for m in messages) // CHARS_PER_TOKEN
    return prompt + min(judge.max_tokens, EXPECTED_COMPLETION_TOKENS)


@dataclass
class GatedCall:
    call: CallJudge
    limiter: RateLimiter
    horizon_s: float
    # A later attempt (after a failure) never defers; it waits, at most this long in all.
    max_wait_s: float = 120.0
    sleep: Callable[[float], None] = time.sleep
    calls: int = field(default=0, init=False)

    def __call__(self, judge: Judge, messages: list[dict[str, str]]) -> ReplyLike:
        self.calls += 1
        key, limits = rate_key(judge), Limits(judge.rpm, judge.tpm, judge.max_in_flight)
        estimate = estimate_tokens(judge, messages)
        token = secrets.token_hex(8)
        waited = 0.0
        while True:
            permit = self.limiter.reserve(key, limits, estimate, token)
            if permit.granted:
                break
            # Only a task's first call defers the task: a later attempt has spent tokens on
            # earlier ones and its tally lives in this thread, so it waits its turn instead.
            far = permit.outcome == DEFERRED or (
                permit.outcome == COOLING and permit.wait_s > self.horizon_s
            )
            if self.calls == 1 and far:
                raise Deferred(permit.wait_s)
            if waited + permit.wait_s > self.max_wait_s:
                raise TransientJudgeError(
                    f"no rate-limit slot for {judge.name} within {self.max_wait_s:g} s",
                    kind="rate_limited",
                )
            self.sleep(permit.wait_s)
            waited += permit.wait_s
        if permit.wait_s > 0:
            self.sleep(permit.wait_s)
        try:
            reply = self.call(judge, messages)
        except TransientJudgeError as exc:
            self.limiter.finish(key, limits, token, 0)
            if exc.kind == "rate_limited":
                self.limiter.cool_down(key, exc.retry_after or DEFAULT_COOL_DOWN_S)
            raise
        except BaseException:
            self.limiter.finish(key, limits, token, 0)
            raise
        used = reply.prompt_tokens + reply.completion_tokens
        self.limiter.finish(key, limits, token, used - estimate if used else 0)
        return reply
