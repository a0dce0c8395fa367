"""The worker engine with real workers, Redis and the simulator over HTTP: waiting is never
failing and holds nothing; a slow task stays with its worker; a batch's own bound on waiting.
(Recovery after a kill is in tests/integration/test_faults.py.)"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.common import simulator_stats
from jury.batchfile.loading import load_batch
from jury.broker.keys import RATE_LIMIT_PREFIX, model_keys
from jury.broker.redis_client import BrokerRedis
from jury.local.services import ManagedProcess, start_simulator, wait_for
from jury.producer.publishing import create_producer_app
from jury.producer.submission import submit_batch
from jury.schemas.batch import Judge
from jury.schemas.tasks import CellRef
from jury.store.engine import session_factory
from jury.store.repository import batch_status
from jury.store.samples import list_samples
from jury.worker.limits.gating import rate_key
from tests.conftest import WorkerStarter, settings_for, stop_workers
from tests.integration.test_faults import assert_exactly_once
from tests.integration.test_pipeline import ITEMS, write_batch

pytestmark = pytest.mark.integration


@pytest.fixture
def slow_simulator(tmp_path: Path) -> Iterator[ManagedProcess]:
    process = start_simulator(tmp_path, ["--latency-ms", "400", "--latency-sigma", "0"])
    yield process
    process.stop()


def test_waiting_for_an_in_flight_slot_is_not_failing(
    tmp_path: Path, redis_url: str, start_workers: WorkerStarter, slow_simulator: ManagedProcess
) -> None:
    """One call at a time to a slow local server (max_in_flight: 1), 20 samples from two
    workers: every sample is judged, none fails for having waited, the server never sees two
    calls at once, and the tasks that wait are parked in the model's line, not held."""
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    workers = start_workers(settings, count=2)
    model = f"openai/balanced@line{secrets.token_hex(3)}"
    judge = {"model": model, "n": 2, "max_in_flight": 1, "timeout_s": 5}
    batch = write_batch(tmp_path, slow_simulator, [judge], cache=False)
    sessions = session_factory(settings.database_url)
    batch_id = submit_batch(load_batch(batch), sessions, create_producer_app(settings))
    broker = BrokerRedis.from_settings(settings)
    judged_by = Judge.model_validate({**judge, "api_base": slow_simulator.url})
    line = model_keys(broker.key(RATE_LIMIT_PREFIX), rate_key(judged_by)).waiters
    waiting: list[int] = []

    def finished() -> bool:
        waiting.append(int(broker.client.llen(line)))
        return batch_status(sessions, batch_id).status.finished

    wait_for(finished, 90, "the batch", poll=0.1)
    broker.close()
    assert_exactly_once(settings, batch_id)
    status = batch_status(sessions, batch_id)
    assert status.n_failed_samples == 0
    stats = simulator_stats(slow_simulator)
    assert stats["max_in_flight_per_model"][model.removeprefix("openai/")] == 1
    assert max(waiting) >= 5, "the waiting tasks were parked in the model's line"
    # Stopped as a user stops one (SIGTERM: a warm shutdown), a worker that called a judge
    # closes its HTTP connections: its log ends without a traceback.
    stop_workers(workers)
    for worker in workers:
        log = worker.log_tail(80)
        assert "Warm shutdown" in log and worker.process.returncode == 0, log
        assert "Traceback" not in log and "Unclosed" not in log, log


def test_a_slow_task_stays_with_its_worker(
    tmp_path: Path, redis_url: str, start_workers: WorkerStarter
) -> None:
    """Calls that last longer than the heartbeat timeout: the worker beats, so no other
    worker is handed its tasks; each sample is called once."""
    slow = start_simulator(tmp_path, ["--latency-ms", "4000", "--latency-sigma", "0"])
    try:
        settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}").model_copy(
            update={"heartbeat_timeout_s": 2.0}
        )
        # Forked from one preloaded process, as `jury worker --processes 2` starts them.
        start_workers(settings, count=2, forked=True)
        model = f"openai/balanced@slow{secrets.token_hex(3)}"
        judge = {"model": model, "n": 1, "timeout_s": 20}
        batch = write_batch(tmp_path, slow, [judge], cache=False)
        sessions = session_factory(settings.database_url)
        batch_id = submit_batch(load_batch(batch), sessions, create_producer_app(settings))
        wait_for(lambda: batch_status(sessions, batch_id).status.finished, 60, "the batch")
        assert_exactly_once(settings, batch_id)
        calls = simulator_stats(slow)["models"][model.removeprefix("openai/")]
        assert int(calls["200"]) == len(ITEMS) * 2, "a task was handed to a second worker"
    finally:
        slow.stop()


def test_a_batch_bounds_its_waiting(
    tmp_path: Path, redis_url: str, start_workers: WorkerStarter, simulator: ManagedProcess
) -> None:
    """`max_wait_s`: the one wait that fails a sample, by the batch's own choice."""
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    start_workers(settings)
    model = f"openai/balanced@wait{secrets.token_hex(3)}"
    judge = {"model": model, "n": 3, "rpm": 6}  # one call every ten seconds
    batch = write_batch(tmp_path, simulator, [judge], cache=False, max_wait_s=1)
    sessions = session_factory(settings.database_url)
    batch_id = submit_batch(load_batch(batch), sessions, create_producer_app(settings))
    wait_for(lambda: batch_status(sessions, batch_id).status.finished, 60, "the batch")
    kinds = {
        s.error_kind
        for item in ITEMS
        for dimension in ("relevance", "tone")
        for s in list_samples(sessions, CellRef(batch_id, str(item["id"]), dimension))
    }
    assert "wait_limit" in kinds and None in kinds
    assert "rate_limited" not in kinds
