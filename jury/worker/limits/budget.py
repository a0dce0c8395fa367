"""The budget meter: what a batch's judge calls have cost, shared by every worker in Redis.

A batch with `max_cost_usd` stops taking new judge calls once its recorded cost reaches the
cap. Calls already in flight finish, so the final cost can pass the cap by at most one call
per busy worker thread. The meter lives in Redis (INCRBYFLOAT is atomic across hosts); if
Redis lost it, it is rebuilt from the costs stored in the database.
"""

from __future__ import annotations

from collections.abc import Callable

from jury.broker.redis_client import BrokerRedis
from jury.schemas.tasks import budget_cap_key, budget_spent_key

# Meters outlive any batch we expect; they go away on their own after that.
METER_TTL_S = 30 * 86_400


class BudgetMeter:
    def __init__(self, broker: BrokerRedis, stored_cost: Callable[[str], float]) -> None:
        self.client = broker.client
        self.key = broker.key
        self.stored_cost = stored_cost

    def spend(self, batch_id: str, usd: float) -> None:
        if usd > 0:
            key = self.key(budget_spent_key(batch_id))
            pipe = self.client.pipeline()
            pipe.incrbyfloat(key, usd)
            pipe.expire(key, METER_TTL_S)
            pipe.execute()

    def exhausted(self, batch_id: str, default_cap: float | None) -> tuple[bool, float, float]:
        """(cap reached?, spent, cap); a batch without a cap is never exhausted."""
        cap_key, spent_key = (
            self.key(budget_cap_key(batch_id)),
            self.key(budget_spent_key(batch_id)),
        )
        cap_raw, spent_raw = self.client.mget(cap_key, spent_key)
        cap = float(cap_raw) if cap_raw is not None else default_cap
        if cap is None:
            return False, 0.0, float("inf")
        if spent_raw is None:
            spent = self.stored_cost(batch_id)
            self.client.set(spent_key, spent, nx=True, ex=METER_TTL_S)
        else:
            spent = float(spent_raw)
        return spent >= cap, spent, cap
