"""A judge task whose store cannot be read before its call (a database outage) waits for the
store: it is parked as it was, nothing called or paid, and tried again later. It failed as
'raised unexpected: OperationalError' before, its sample lost and its batch never ended.
In-process, with a real Redis and a real SQLite store that goes away."""

from __future__ import annotations

from pathlib import Path

from jury.schemas.batch import BatchConfig, Item, Judge
from jury.store.engine import dispose_all
from jury.store.repository import add_items, create_batch, start_batch
from jury.worker.runtime import WorkerRuntime
from jury.worker.tasks import Parked, judge_body
from tests.conftest import settings_for
from tests.integration.test_chord import Recorder, Reply

JUDGE = "openai/scripted"


def test_a_task_whose_store_is_away_is_parked_and_calls_nothing(
    tmp_path: Path, redis_url: str
) -> None:
    database = tmp_path / "jury.db"
    settings = settings_for(redis_url, f"sqlite:///{database}")
    calls: list[str] = []

    async def counted_judge(judge: Judge, messages: list[dict[str, str]]) -> Reply:
        calls.append(judge.name)
        return Reply()

    recorder = Recorder()
    runtime = WorkerRuntime(settings, recorder, call=counted_judge)
    try:
        config = BatchConfig.model_validate(
            {"judges": [{"model": JUDGE, "n": 1}], "dimensions": ["relevance"]}
        )
        batch_id = f"outage-{settings.queue}"
        create_batch(runtime.sessions, batch_id, config, "test")
        add_items(runtime.sessions, batch_id, [(0, Item(id="a", output="an answer"))])
        start_batch(runtime.sessions, batch_id, n_items=1, n_dimensions=1)
        # The store goes away: every new connection finds no table (an OperationalError,
        # as a refused or reset connection is).
        dispose_all()
        database.unlink()

        outcome = runtime.loop.run(judge_body(runtime, [batch_id, "a", "relevance", JUDGE, 0], {}))

        assert isinstance(outcome, Parked), outcome
        assert calls == []  # nothing called, nothing paid
        ((task, queue, carried, delay),) = recorder.parked
        assert task == (batch_id, "a", "relevance", JUDGE, 0)
        assert isinstance(queue, str) and queue.startswith(settings.queue)
        assert carried == {"store_retries": 1}  # the task as it was: no samples carried
        assert isinstance(delay, int | float) and delay > 0
    finally:
        runtime.close()
