"""`jury resume` never pays twice: a batch with live tasks is refused; with --force only what
no live task will produce is queued; a submission is never continued from other items."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from jury.batchfile.loading import load_batch
from jury.errors import JuryError
from jury.local.services import start_simulator, wait_for
from jury.producer.control import LiveTasksError, resume_batch
from jury.producer.publishing import create_producer_app
from jury.producer.submission import continue_submission, submit_batch
from jury.schemas.status import BatchState
from jury.store.engine import session_factory
from jury.store.repository import batch_status, set_batch_state
from tests.conftest import WorkerStarter, settings_for
from tests.integration.test_budget import paid_calls
from tests.integration.test_faults import assert_exactly_once
from tests.integration.test_pipeline import ITEMS, write_batch

pytestmark = pytest.mark.integration


def test_resume_of_a_live_batch_queues_only_what_no_live_task_holds(
    tmp_path: Path, redis_url: str, start_workers: WorkerStarter
) -> None:
    slow = start_simulator(tmp_path, ["--latency-ms", "300", "--latency-sigma", "0"])
    try:
        settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}").model_copy(
            update={"worker_concurrency": 2}
        )
        batch = write_batch(tmp_path, slow, [{"model": "openai/balanced", "n": 2}], cache=False)
        sessions = session_factory(settings.database_url)
        app = create_producer_app(settings)
        batch_id = submit_batch(load_batch(batch), sessions, app)  # no worker yet: all queued
        expected = batch_status(sessions, batch_id).n_samples_expected
        # Four tasks lost (as a Redis without persistence loses them): nothing will judge them.
        client = redis.Redis.from_url(redis_url)
        [lane] = [q for q in settings.all_queues if client.llen(q)]  # the judge's lane
        lost = [client.lpop(lane) for _ in range(4)]
        assert all(lost)

        with pytest.raises(LiveTasksError, match="live tasks") as refused:
            resume_batch(sessions, app, batch_id, missing_only=False)
        assert refused.value.live.queued == expected - 4
        start_workers(settings)
        plan = resume_batch(sessions, app, batch_id, missing_only=False, force=True)
        assert plan.n_samples == 4  # the lost ones, and only those

        wait_for(
            lambda: batch_status(sessions, batch_id).status.finished, 90, "the batch to finish"
        )
        assert_exactly_once(settings, batch_id)
        assert paid_calls(slow) == expected  # not one call twice
        client.close()
    finally:
        slow.stop()


def test_a_submission_is_not_continued_from_other_items(
    tmp_path: Path, redis_url: str, simulator: object
) -> None:
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    batch = write_batch(tmp_path, simulator, [{"model": "openai/balanced", "n": 1}])  # type: ignore[arg-type]
    sessions = session_factory(settings.database_url)
    app = create_producer_app(settings)
    batch_id = submit_batch(load_batch(batch), sessions, app)
    redis.Redis.from_url(redis_url).delete(*settings.all_queues)  # no worker here
    set_batch_state(sessions, batch_id, BatchState.SUBMITTING)  # as a producer stopped mid-way
    # The same number of items, other ids: continuing would judge items never in the batch.
    others = [{**item, "id": f"other-{item['id']}"} for item in ITEMS]
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in others))
    with pytest.raises(JuryError, match="not those batch") as refused:
        continue_submission(sessions, app, batch_id)
    assert "Traceback" not in str(refused.value)
    assert batch_status(sessions, batch_id).n_items == len(ITEMS)
