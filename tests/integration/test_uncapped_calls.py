"""A batch without a cost cap: its calls reserve nothing on the budget meter (its cost is in
the store), also once the worker's last look at the meter is older than STATE_TTL_S; a cap
given later (`jury resume --max-cost-usd`) makes the next call reserve again. In-process,
with a real Redis and a real SQLite store."""

from __future__ import annotations

from pathlib import Path

from jury.schemas.batch import BatchConfig, Judge
from jury.store.repository import create_batch
from jury.worker import runtime as worker_runtime
from jury.worker.runtime import WorkerRuntime
from tests.conftest import settings_for
from tests.integration.test_chord import Recorder, Reply


def test_an_uncapped_batch_s_calls_reserve_nothing_until_it_gets_a_cap(
    tmp_path: Path, redis_url: str
) -> None:
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")

    async def judge(judge: Judge, messages: list[dict[str, str]]) -> Reply:
        return Reply()

    runtime = WorkerRuntime(settings, Recorder(), call=judge)
    try:
        config = BatchConfig.model_validate(
            {"judges": [{"model": "openai/scripted", "n": 1}], "dimensions": ["relevance"]}
        )
        batch_id = f"uncapped-{settings.queue}"
        create_batch(runtime.sessions, batch_id, config, "test")
        assert runtime.out_of_budget(batch_id, config) is None
        assert runtime.gated_call(batch_id, config).budget is None

        # The last look lapsed (a task prepared just before it, called just after): the call
        # looks again instead of reserving.
        runtime._uncapped[batch_id] -= worker_runtime.STATE_TTL_S + 1
        assert runtime.gated_call(batch_id, config).budget is None
        assert runtime.uncapped(batch_id, config)  # the look renewed

        runtime.budget.set_cap(batch_id, 1.0)  # `jury resume --max-cost-usd 1`
        runtime._uncapped[batch_id] -= worker_runtime.STATE_TTL_S + 1
        runtime._cap_looked[batch_id] -= worker_runtime.STATE_TTL_S + 1
        looks: list[float | None] = []
        look = runtime.budget.cap

        def counted(batch_id: str) -> float | None:
            looks.append(look(batch_id))
            return looks[-1]

        runtime.budget.cap = counted  # type: ignore[method-assign]
        for _ in range(3):
            budget = runtime.gated_call(batch_id, config).budget
            assert budget is not None and budget.cap_usd is None  # the meter's cap applies
        assert looks == [1.0]  # looked at once, not at every call
        assert not runtime.uncapped(batch_id, config)

        capped = config.model_copy(update={"max_cost_usd": 2.0})
        assert runtime.gated_call(batch_id, capped).budget is not None
    finally:
        runtime.close()
