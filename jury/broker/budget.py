"""A batch's budget meter in Redis, shared by every worker of its deployment.

Every paid call reserves its estimated cost before it is sent, in the same atomic step that
checks the cap (budget_reserve.lua); its real cost settles the reservation when it ends
(budget_settle.lua). However many calls are in flight, on however many workers, the settled
spend can pass the cap only by what the estimates of the calls in flight under-estimated
(jury.worker.limits.budget makes each estimate an upper bound where it can: the judge's
max_tokens for the answer). A reservation whose call never settles (its worker died) lapses
after RESERVATION_LEASE_S, so the room it held comes back.

Amounts are kept in nano-dollars as integers: INCRBY is exact where INCRBYFLOAT's sums drift.
If Redis lost the meter, the next reservation rebuilds `spent` from the costs stored in the
database.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from jury.broker import keys as redis_keys
from jury.broker.redis_client import BrokerRedis
from jury.broker.scripts import lua

NANO_PER_USD = 1_000_000_000
# Meters outlive any batch we expect; they go away on their own after that.
METER_TTL_MS = 30 * 86_400 * 1000
# Longer than any call jury makes (its timeout, its retries' waits are separate calls).
RESERVATION_LEASE_S = 900


def to_nano(usd: float) -> int:
    return max(0, round(usd * NANO_PER_USD))


def to_usd(nano: float) -> float:
    return nano / NANO_PER_USD


@dataclass(frozen=True)
class MeterReading:
    """A batch's meter, in USD: settled spend, reserved by calls in flight, and the cap."""

    spent_usd: float
    reserved_usd: float
    cap_usd: float | None  # None: the batch has no cap

    @property
    def exhausted(self) -> bool:
        """Nothing more can be spent: the settled spend has reached the cap."""
        return self.cap_usd is not None and self.spent_usd >= self.cap_usd


@dataclass(frozen=True)
class Reservation:
    granted: bool
    reading: MeterReading


class BudgetMeter:
    def __init__(
        self, broker: BrokerRedis, queue: str, stored_cost: Callable[[str], float]
    ) -> None:
        self.broker = broker
        self.queue = queue
        self.stored_cost = stored_cost
        self._reserve = broker.client.register_script(lua("budget_reserve"))
        self._settle = broker.client.register_script(lua("budget_settle"))

    def _keys(self, batch_id: str) -> list[str]:
        return [self.broker.key(k) for k in redis_keys.budget(self.queue, batch_id)]

    def reserve(
        self,
        batch_id: str,
        token: str,
        usd: float,
        default_cap: float | None,
        lease_s: float = RESERVATION_LEASE_S,
    ) -> Reservation:
        """Reserve `usd` for the call named `token`, if spent + reserved + `usd` stays within
        the cap (the meter's own, set by `jury resume --max-cost-usd`, else `default_cap`),
        for `lease_s` at most."""
        cap_arg = "" if default_cap is None else str(to_nano(default_cap))
        args: list[str | int] = [token, to_nano(usd), round(lease_s * 1000), cap_arg, METER_TTL_MS]
        keys = self._keys(batch_id)
        granted, spent, reserved, cap = self._reserve(keys=keys, args=args)
        if granted == -1:  # no meter yet (a new batch, or Redis lost it): from the store
            self._seed(batch_id)
            granted, spent, reserved, cap = self._reserve(keys=keys, args=args)
        reading = MeterReading(to_usd(spent), to_usd(reserved), None if cap < 0 else to_usd(cap))
        return Reservation(granted == 1, reading)

    def settle(self, batch_id: str, token: str, cost_usd: float) -> None:
        """The call named `token` ended, costing `cost_usd` (0 if it failed unpaid)."""
        keys = self._keys(batch_id)
        args: list[str | int] = [token, to_nano(cost_usd), METER_TTL_MS]
        if self._settle(keys=keys, args=args) == -1:  # the meter was lost: rebuilt, then counted
            self._seed(batch_id)
            self._settle(keys=keys, args=args)

    def add_spent(self, batch_id: str, cost_usd: float) -> None:
        """Count a cost that had no reservation of its own (a provider batch's results)."""
        self.settle(batch_id, "", cost_usd)

    def read(self, batch_id: str, default_cap: float | None) -> MeterReading:
        keys = redis_keys.budget(self.queue, batch_id)
        cap, spent, reserved = self.broker.client.mget(
            [self.broker.key(keys.cap), self.broker.key(keys.spent), self.broker.key(keys.reserved)]
        )
        spent_usd = self._seed(batch_id) if spent is None else to_usd(int(spent))
        cap_usd = to_usd(int(cap)) if cap is not None else default_cap
        return MeterReading(spent_usd, to_usd(max(0, int(reserved or 0))), cap_usd)

    def cap(self, batch_id: str) -> float | None:
        """The meter's own cap (`jury resume --max-cost-usd`), None without one: one GET."""
        value = self.broker.client.get(self.broker.key(redis_keys.budget(self.queue, batch_id).cap))
        return None if value is None else to_usd(int(value))

    def set_cap(self, batch_id: str, cap_usd: float) -> None:
        """A new cap (`jury resume --max-cost-usd`): the meter opens again."""
        keys = redis_keys.budget(self.queue, batch_id)
        with self.broker.client.pipeline() as pipe:
            pipe.set(self.broker.key(keys.cap), to_nano(cap_usd), px=METER_TTL_MS)
            pipe.delete(self.broker.key(keys.closed))
            pipe.execute()

    def close(self, batch_id: str) -> None:
        """No call reserves any more (the batch was stopped for its budget)."""
        key = self.broker.key(redis_keys.budget(self.queue, batch_id).closed)
        self.broker.client.set(key, 1, px=METER_TTL_MS)

    def _seed(self, batch_id: str) -> float:
        spent = self.stored_cost(batch_id)
        key = self.broker.key(redis_keys.budget(self.queue, batch_id).spent)
        self.broker.client.set(key, to_nano(spent), nx=True, px=METER_TTL_MS)
        return spent
