"""Putting every judge call through the cluster-wide rate limiter.

`GatedCall` wraps the LLM call: before it, reserve a slot (sleeping in the event loop up to
the horizon, or parking the whole task when its slot lies further ahead or every in-flight
slot is taken); after it, free the in-flight slot (handing it to the first waiter) and correct
the token estimate from the usage the provider reported; on a 429, start the shared cool-down
that every worker honours and cut the model's cluster-wide pace.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from functools import partial

from jury.errors import JuryError, TransientJudgeError
from jury.schemas.batch import Judge
from jury.worker.calls.send_wait import waiting_at_send
from jury.worker.judging.judge_calls import CallJudge, ReplyLike, Sleep
from jury.worker.limits.budget import BudgetRefused, CallBudget, Deferral
from jury.worker.limits.ratelimit import SEND_SPACING, Limits, Outcome, RateLimiter
from jury.worker.metrics import recording as metrics

# A 429 without Retry-After silences the model this long.
DEFAULT_COOL_DOWN_S = 5.0
# A 429 cuts the model's pace to this fraction of itself (the pace recovers with the calls
# granted after it: jury.worker.limits.ratelimit.pace_step).
SLOW_DOWN_ON_429 = 0.97
# A provider saying its window is spent pauses the model this long at most, until the reset.
MAX_HEADER_PAUSE_S = 2.0
# Expected answer length, before the usage says: a JSON score and a sentence or two.
EXPECTED_COMPLETION_TOKENS = 100
CHARS_PER_TOKEN = 4


class Deferred(JuryError):
    """The task's first call cannot start soon: park the task (jury.broker.parking) for
    `countdown_s`, or, with `line`, in the model's waiting line for an in-flight slot."""

    def __init__(self, countdown_s: float, line: str = "") -> None:
        why = "every in-flight slot is taken" if line else f"no slot for {countdown_s:.1f} s"
        super().__init__(f"{why}: parking the task")
        self.countdown_s = countdown_s
        self.line = line


# Per model without limits of its own: until when (time.monotonic) this process rests it
# after the provider pushed back. Such a model's calls never ask the shared limiter (a round
# trip per call spared), which holds the cool-down for the models that do; so this process
# honours it itself, and every other process from its own first 429.
_RESTING: dict[str, float] = {}

# Per event loop and model: the one task of this process waiting at the model's send gate.
_GATE_TURNS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)


# Per event loop and model: the loop's time before which this process's next send cannot
# pass the gate (its last send's, plus the least spacing the gate ever asks: SEND_SPACING of
# the quota's interval). Asked sooner, the gate could only answer "wait": a round trip
# spared, for each call queued behind another of this process (gate_turn).
_GATE_NOT_BEFORE: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, float]] = (
    weakref.WeakKeyDictionary()
)


def least_send_spacing_s(limits: Limits) -> float:
    """The least time the send gate ever asks between two sends of a model: at its full pace,
    without the margin (a lower bound whatever the cluster's pace and margin)."""
    return 60 / limits.rpm * SEND_SPACING if limits.rpm else 0.0


@asynccontextmanager
async def gate_turn(key: str) -> AsyncIterator[None]:
    """One task per process and model polls the send gate at a time, the others queue behind
    it in order: late calls reaching the gate together would otherwise all poll Redis at every
    send, a crowd that kept the event loop so busy that every call woke later still."""
    turns = _GATE_TURNS.setdefault(asyncio.get_running_loop(), {})
    async with turns.setdefault(key, asyncio.Lock()):
        yield


def rate_key(judge: Judge) -> str:
    """One limit per (api_base, model): the same model behind two servers has two quotas."""
    return _hashed(f"{judge.api_base or ''}|{judge.model}")


def endpoint_rate_key(url: str) -> str:
    """One limit per HTTP endpoint (its URL as written, placeholders unexpanded)."""
    return _hashed(f"endpoint|{url}")


def _hashed(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


async def wait_for_slot(
    limiter: RateLimiter,
    key: str,
    limits: Limits,
    tokens: int,
    token: str,
    sleep: Sleep = asyncio.sleep,
    park_beyond_s: float | None = None,
) -> None:
    """Reserve a slot, waiting in the event loop until it comes. With `park_beyond_s` (a
    task's first call: nothing spent yet), a slot further ahead than that, or every in-flight
    slot taken, parks the task instead (Deferred)."""
    while True:
        permit = limiter.reserve(key, limits, tokens, token)
        if permit.granted:
            if permit.wait_s > 0:
                try:
                    await sleep(permit.wait_s)
                except BaseException:  # cancelled before its call: the slot is not used
                    limiter.finish(key, limits, token, 0)
                    raise
            return
        if park_beyond_s is not None:
            if permit.outcome == Outcome.BUSY:
                raise Deferred(0.0, line=permit.line)
            if permit.outcome == Outcome.DEFERRED or permit.wait_s > park_beyond_s:
                raise Deferred(permit.wait_s)
        await sleep(permit.wait_s)


@asynccontextmanager
async def holding_slot(
    limiter: RateLimiter, key: str, limits: Limits, sleep: Sleep = asyncio.sleep
) -> AsyncIterator[None]:
    """Within this block, the call holds a slot of `limits` (none to hold: nothing to do),
    waited for in the loop; the in-flight slot is freed when it ends."""
    if not limits.active:
        yield
        return
    token = secrets.token_hex(8)
    await wait_for_slot(limiter, key, limits, 0, token, sleep)
    try:
        yield
    finally:
        limiter.finish(key, limits, token, 0)


def estimate_tokens(judge: Judge, messages: list[dict[str, str]]) -> int:
    prompt = sum(len(m.get("content") or "") for m in messages) // CHARS_PER_TOKEN
    return prompt + min(judge.max_tokens, EXPECTED_COMPLETION_TOKENS)


def never(judge: Judge) -> bool:
    return False


@dataclass
class GatedCall:
    call: CallJudge
    limiter: RateLimiter
    horizon_s: float
    sleep: Sleep = asyncio.sleep
    # Whether `call` runs the send gate's wait at its HTTP send (jury.worker.calls.send_wait) for
    # this judge; otherwise the gate is passed just before `call`.
    waits_at_send: Callable[[Judge], bool] = never
    # The batch's budget: each call reserves its estimate first (None: no meter to keep).
    budget: CallBudget | None = None
    calls: int = field(default=0, init=False)

    async def __call__(self, judge: Judge, messages: list[dict[str, str]]) -> ReplyLike:
        self.calls += 1
        return await metrics.watch_call(judge, self._gated(judge, messages))

    async def _gated(self, judge: Judge, messages: list[dict[str, str]]) -> ReplyLike:
        key, limits = rate_key(judge), Limits(judge.rpm, judge.tpm, judge.max_in_flight)
        estimate = estimate_tokens(judge, messages)
        token = secrets.token_hex(8)
        if limits.active:
            with metrics.slot_waited(judge):
                await self._wait_for_slot(key, limits, estimate, token)
        else:
            await self._rest(key)
        if self.budget is None:
            return await self._send(judge, messages, key, limits, estimate, token)
        try:
            async with self.budget.held(judge, messages, self.calls == 1, self.sleep) as paid:
                reply = await self._send(judge, messages, key, limits, estimate, token)
                paid(reply.cost_usd)
                return reply
        except (Deferral, BudgetRefused) as exc:  # no room on the budget: nothing was sent
            self.limiter.finish(key, limits, token, 0)
            if isinstance(exc, Deferral):
                raise Deferred(exc.wait_s) from None
            raise

    async def _send(
        self,
        judge: Judge,
        messages: list[dict[str, str]],
        key: str,
        limits: Limits,
        estimate: int,
        token: str,
    ) -> ReplyLike:
        """The call itself, its slot freed and the provider's word learnt after it."""
        # An rpm's send gate: woken late (a busy CPU), a call would leave together with the
        # next ones; the gate spaces the sends themselves, as close to the wire as the call
        # lets it.
        at_send = bool(limits.rpm) and self.waits_at_send(judge)
        try:
            if limits.rpm and not at_send:
                await self._pass_send_gate(key, limits)
            with (
                waiting_at_send(partial(self._pass_send_gate, key, limits))
                if at_send
                else nullcontext(),
                metrics.in_flight(judge),
            ):
                reply = await self.call(judge, messages)
        except TransientJudgeError as exc:
            self.limiter.finish(key, limits, token, 0)
            if exc.kind == "rate_limited":
                # The provider pushed back: every worker waits, then paces this model slower.
                self._cool(key, limits, exc.retry_after or DEFAULT_COOL_DOWN_S)
                self.limiter.slow_down(key, SLOW_DOWN_ON_429)
            raise
        except BaseException:
            self.limiter.finish(key, limits, token, 0)
            raise
        used = reply.prompt_tokens + reply.completion_tokens
        if limits.active:
            self.limiter.finish(key, limits, token, used - estimate if used else 0)
        self._learn(key, limits, reply)
        return reply

    def _cool(self, key: str, limits: Limits, seconds: float) -> None:
        self.limiter.cool_down(key, seconds)
        if not limits.active:
            until = time.monotonic() + seconds
            _RESTING[key] = max(_RESTING.get(key, 0.0), until)

    async def _rest(self, key: str) -> None:
        """Wait out this process's cool-down of a model without limits of its own."""
        until = _RESTING.get(key)
        if until is None:
            return
        left = until - time.monotonic()
        if left > 0:
            await self.sleep(left)
        else:
            _RESTING.pop(key, None)

    async def _wait_for_slot(self, key: str, limits: Limits, tokens: int, token: str) -> None:
        """Reserve a slot, waiting in the loop for one within the horizon. The task's first
        call parks the task instead (Deferred) when its slot lies further ahead or every
        in-flight slot is taken: nothing is spent yet. A later call (a retry, a pair's second
        order) has spent tokens already, so it waits its turn in the loop: never failing for
        having waited."""
        park_beyond = self.horizon_s if self.calls == 1 else None
        await wait_for_slot(self.limiter, key, limits, tokens, token, self.sleep, park_beyond)

    async def _pass_send_gate(self, key: str, limits: Limits) -> None:
        loop = asyncio.get_running_loop()
        not_before = _GATE_NOT_BEFORE.setdefault(loop, {})
        async with gate_turn(key):
            if (early := not_before.get(key, 0.0) - loop.time()) > 0:
                await self.sleep(early)
            while (gap := self.limiter.send_gate(key, limits)) > 0:
                await self.sleep(gap)
            # When the request leaves: aiohttp (on Python < 3.12) writes it in a task it
            # queues after this callback, behind whatever the event loop has ready; on 3.12
            # and later it writes at once, just before. Queued before the gate's next turn.
            loop.call_soon(self.limiter.sent, key)
            not_before[key] = loop.time() + least_send_spacing_s(limits)

    def _learn(self, key: str, limits: Limits, reply: ReplyLike) -> None:
        """A provider whose headers say its request window is spent (no request left until
        its reset) would answer the next call 429: every worker pauses the model until the
        reset instead, so the window refills before anyone asks."""
        remaining = getattr(reply, "remaining_requests", None)
        reset = getattr(reply, "reset_requests_s", None)
        if remaining == 0 and reset:
            # The provider counted its window when it took the call, an answer ago (the
            # latency runs from the send): that much of the reset is spent. Counted from the
            # answer instead, each pause (150-250 ms, a 300 rpm model's 400 ms calls against
            # a one-second window, bench/ratelimit) began after the window had reset.
            left = reset - reply.latency_ms / 1000
            if left > 0:
                self._cool(key, limits, min(left, MAX_HEADER_PAUSE_S))
