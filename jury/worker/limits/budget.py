"""A batch's budget, held at every paid call: the call's estimated cost is reserved on the
batch's meter (jury.broker.budget) before it is sent, and its real cost settles it after.

The estimate is meant as an upper bound, so that a batch ends at or under its cap: the
prompt's characters count as tokens at CHARS_PER_TOKEN (3: English runs near 4), and the
answer as the judge's whole `max_tokens` (a provider never answers more). A call that does
not fit waits while other calls are in flight (their settling may leave room): a task's first
call parks the task, a later one waits in the loop. With nothing in flight and still no room,
the batch's budget is spent: BudgetRefused.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from jury.broker.budget import BudgetMeter, MeterReading
from jury.errors import JuryError
from jury.schemas.batch import Judge

# An upper-leaning estimate of tokens from characters (tokenizers give ~4 for English).
CHARS_PER_TOKEN = 3
# Tokens a chat message costs besides its content (role, separators).
TOKENS_PER_MESSAGE = 8
# How soon a call that found no room looks again, while other calls are in flight.
BUDGET_RECHECK_S = 0.5

# (input, output) USD per token of a model, or None when unknown (jury.worker.calls).
PriceLookup = Callable[[str], tuple[float, float] | None]


def no_prices(model: str) -> tuple[float, float] | None:
    return None


class BudgetRefused(JuryError):
    """The batch's cap leaves no room for another call, and no call in flight can free any."""

    def __init__(self, batch_id: str, reading: MeterReading) -> None:
        self.batch_id = batch_id
        self.reading = reading
        super().__init__(budget_reason(batch_id, reading))


def budget_reason(batch_id: str, reading: MeterReading) -> str:
    """The stored reason of a batch stopped by its budget, with its real spend."""
    in_flight = (
        f" (and ${reading.reserved_usd:.4f} reserved by calls still in flight)"
        if reading.reserved_usd > 0
        else ""
    )
    return (
        f"budget reached: ${reading.spent_usd:.4f} spent{in_flight} of max_cost_usd "
        f"${reading.cap_usd or 0:g}; no new judge calls. "
        f"Raise it with `jury resume {batch_id} --max-cost-usd N`"
    )


def call_prices(judge: Judge, lookup: PriceLookup) -> tuple[float, float]:
    """The judge's own prices where it gives them, else the price map's; (0, 0) unknown."""
    if judge.input_cost_per_token is not None or judge.output_cost_per_token is not None:
        return judge.input_cost_per_token or 0.0, judge.output_cost_per_token or 0.0
    return lookup(judge.model) or (0.0, 0.0)


def estimate_cost(judge: Judge, messages: list[dict[str, str]], lookup: PriceLookup) -> float:
    """What the call may cost at most (see the module's docstring)."""
    input_price, output_price = call_prices(judge, lookup)
    if not input_price and not output_price:
        return 0.0
    chars = sum(len(m.get("content") or "") for m in messages)
    prompt = -(-chars // CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE * len(messages)
    return prompt * input_price + judge.max_tokens * output_price


class Deferral(Exception):
    """No room now, but calls in flight may leave some: come back in `wait_s`."""

    def __init__(self, wait_s: float) -> None:
        super().__init__(f"no budget room for {wait_s:g} s")
        self.wait_s = wait_s


@dataclass
class CallBudget:
    """One task's hold on its batch's budget."""

    meter: BudgetMeter
    batch_id: str
    cap_usd: float | None
    prices: PriceLookup = no_prices

    @asynccontextmanager
    async def held(
        self,
        judge: Judge,
        messages: list[dict[str, str]],
        may_park: bool,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> AsyncIterator[Callable[[float], None]]:
        """Within this block the call's estimate is reserved; call what it yields with the
        call's real cost (the block's end without it settles at 0: an unpaid failure). With
        `may_park`, no room raises Deferral instead of waiting in the loop."""
        estimate = estimate_cost(judge, messages, self.prices)
        token = secrets.token_hex(8)
        while True:
            reservation = self.meter.reserve(self.batch_id, token, estimate, self.cap_usd)
            if reservation.granted:
                break
            if reservation.reading.reserved_usd <= 0:
                raise BudgetRefused(self.batch_id, reservation.reading)
            if may_park:
                raise Deferral(BUDGET_RECHECK_S)
            await sleep(BUDGET_RECHECK_S)
        cost = [0.0]
        try:
            yield lambda usd: cost.__setitem__(0, usd)
        finally:
            self.meter.settle(self.batch_id, token, cost[0])
