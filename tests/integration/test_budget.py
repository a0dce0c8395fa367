"""A batch's budget holds under any concurrency: each paid call reserves its estimated cost in
the step that checks the cap, before it is sent (jury.broker.budget). Real worker, real Redis,
the simulator as a 1-second judge."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from jury.batchfile.loading import load_batch
from jury.local.services import ManagedProcess, start_simulator, wait_for
from jury.producer.control import raise_budget, resume_batch
from jury.producer.publishing import create_producer_app
from jury.producer.submission import submit_batch
from jury.schemas.status import BatchState
from jury.store.engine import session_factory
from jury.store.repository import batch_status
from jury.store.samples import stored_cost
from tests.conftest import WorkerStarter, queue_idle, settings_for
from tests.integration.test_control import stored_samples
from tests.integration.test_pipeline import write_batch

pytestmark = pytest.mark.integration

PRICE = 1e-5  # USD per token, in and out: a call of ~300 tokens costs ~$0.003
CAP = 0.015  # about five calls


def paid_calls(simulator: ManagedProcess) -> int:
    with urllib.request.urlopen(simulator.url.removesuffix("/v1") + "/stats") as answer:
        total: int = json.load(answer)["total"]
    return total


def stopped(sessions: object, batch_id: str) -> bool:
    return batch_status(sessions, batch_id).status == BatchState.STOPPED  # type: ignore[arg-type]


@pytest.mark.parametrize("concurrency", [512, pytest.param(256, marks=pytest.mark.slow)])
def test_budget_holds_at_high_concurrency(
    tmp_path: Path, redis_url: str, start_workers: WorkerStarter, concurrency: int
) -> None:
    slow = start_simulator(tmp_path, ["--latency-ms", "1000", "--latency-sigma", "0"])
    try:
        settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}").model_copy(
            update={"worker_concurrency": concurrency}
        )
        start_workers(settings)
        judge = {
            "model": "openai/balanced",
            "n": 8,
            "max_tokens": 64,
            "input_cost_per_token": PRICE,
            "output_cost_per_token": PRICE,
        }
        batch = write_batch(tmp_path, slow, [judge], max_cost_usd=CAP, cache=False)
        sessions = session_factory(settings.database_url)
        app = create_producer_app(settings)
        # 80 judge tasks at once, all in flight together but for the budget.
        batch_id = submit_batch(load_batch(batch), sessions, app)
        wait_for(lambda: stopped(sessions, batch_id), 90, "the budget to stop the batch")
        wait_for(lambda: queue_idle(settings), 60, "the parked tasks to come back and stop")

        spent = stored_cost(sessions, batch_id)
        calls = paid_calls(slow)
        status = batch_status(sessions, batch_id)
        assert 0 < spent <= CAP, (spent, calls)  # never past the cap…
        per_call = spent / calls
        assert spent > CAP - 3 * per_call  # …nor stopped far short of it
        assert calls < 20  # of 80 tasks
        assert calls == stored_samples(sessions, batch_id)
        print(f"concurrency {concurrency}: {calls} paid calls, ${spent:.4f} of ${CAP}")
        assert status.error and f"${spent:.4f} spent" in status.error  # the real spend

        # A raised cap (`jury resume --max-cost-usd`) holds as the first did.
        raise_budget(sessions, settings, batch_id, 2 * CAP)
        resume_batch(sessions, app, batch_id, missing_only=False)
        wait_for(lambda: stopped(sessions, batch_id), 90, "the raised budget to stop it")
        wait_for(lambda: queue_idle(settings), 60, "the queue to drain")
        spent = stored_cost(sessions, batch_id)
        assert CAP < spent <= 2 * CAP
        assert paid_calls(slow) == stored_samples(sessions, batch_id)  # each paid call kept
    finally:
        slow.stop()


def test_a_provider_batch_reserves_its_cost_before_the_upload(
    tmp_path: Path, redis_url: str, logs_dir: Path, start_workers: WorkerStarter
) -> None:
    """A Batch API judge's provider batch reserves its requests' estimate before it is
    uploaded: one that cannot fit is never sent, and the budget stops the batch."""
    from tests.integration.test_batch_api import FAST, _sim_batches, batch_simulator

    folder = tmp_path / "sim-batches"
    sim = batch_simulator(logs_dir, folder, "--batch-delay", "0.2")
    try:
        settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
        start_workers(settings, 1, **FAST)
        judge = {
            "model": "openai/lenient",
            "n": 2,
            "batch_api": True,
            "input_cost_per_token": PRICE,
            "output_cost_per_token": PRICE,
        }
        # 20 requests of ~$0.004 estimated each: $0.08, past a $0.02 cap.
        batch = write_batch(tmp_path, sim, [judge], max_cost_usd=0.02, cache=False)
        sessions = session_factory(settings.database_url)
        batch_id = submit_batch(load_batch(batch), sessions, create_producer_app(settings))
        wait_for(lambda: stopped(sessions, batch_id), 60, "the budget to stop the batch")
        status = batch_status(sessions, batch_id)
        assert status.error and "budget reached: $0.0000 spent" in status.error
        assert _sim_batches(folder) == []  # nothing uploaded, nothing paid
        assert stored_cost(sessions, batch_id) == 0
    finally:
        sim.stop()
