"""`jury cancel` and `jury resume` against real workers, Redis and the simulator."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from jury.batchfile.loading import load_batch
from jury.cli.main import jury as cli
from jury.local.services import ManagedProcess, python_module, start_simulator, wait_for
from jury.producer.publishing import create_producer_app
from jury.producer.submission import submit_batch
from jury.schemas.status import BatchState
from jury.settings import Settings
from jury.store.engine import session_factory
from jury.store.repository import batch_status
from jury.store.samples import stored_cost
from tests.conftest import queue_idle, worker_env
from tests.integration.test_cli import jury
from tests.integration.test_faults import assert_exactly_once
from tests.integration.test_pipeline import write_batch

pytestmark = pytest.mark.integration


def simulator_calls(simulator: ManagedProcess) -> int:
    with urllib.request.urlopen(simulator.url.removesuffix("/v1") + "/stats") as answer:
        total: int = json.load(answer)["total"]
    return total


def test_resume_rejudges_failed_samples_once_the_judge_is_back(
    tmp_path: Path, sqlite_workers: Settings
) -> None:
    flaky = start_simulator(tmp_path, ["--down", "strict"])
    try:
        judges = [{"model": "openai/balanced", "n": 2}, {"model": "openai/strict", "n": 1}]
        batch = write_batch(tmp_path, flaky, judges)
        env = worker_env(sqlite_workers)
        done = jury(["submit", str(batch), "--wait", "--timeout", "60"], env, tmp_path)
        batch_id = done.stdout.strip().splitlines()[-1]
        sessions = session_factory(sqlite_workers.database_url)
        assert batch_status(sessions, batch_id).n_failed_samples == 10

        nothing = jury(["resume", batch_id, "--missing-only"], env, tmp_path)
        assert "re-enqueued 0 samples" in nothing.stdout

        # The provider recovers: the same simulator, on the same port, without the fault.
        port = flaky.url.split(":")[-1].split("/")[0]
        flaky.argv = [*python_module("jury.simulator"), "--port", port]
        flaky.restart()
        wait_for(lambda: _answers(flaky), 30, "the simulator to come back")

        resumed = jury(["resume", batch_id, "--wait"], env, tmp_path)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert "re-enqueued 10 samples in 10 cells" in resumed.stdout
        status = batch_status(sessions, batch_id)
        assert status.status == BatchState.COMPLETED and status.n_failed_samples == 0
        assert status.n_flagged < 10
        assert_exactly_once(sqlite_workers, batch_id)
    finally:
        flaky.stop()


def _answers(simulator: ManagedProcess) -> bool:
    try:
        simulator_calls(simulator)
        return True
    except OSError:
        return False


def test_cancel_skips_queued_work_and_resume_finishes_it(
    tmp_path: Path, sqlite_workers: Settings
) -> None:
    slow = start_simulator(tmp_path, ["--latency-ms", "1000", "--latency-sigma", "0.05"])
    try:
        # 80 calls of 1 s each over 16 threads: about 5 s, time enough to cancel.
        judges = [{"model": "openai/balanced", "n": 4}, {"model": "openai/lenient", "n": 4}]
        sessions = session_factory(sqlite_workers.database_url)
        app = create_producer_app(sqlite_workers)
        batch_id = submit_batch(load_batch(write_batch(tmp_path, slow, judges)), sessions, app)
        expected = batch_status(sessions, batch_id).n_samples_expected
        wait_for(lambda: batch_status(sessions, batch_id).n_verdicts >= 1, 60, "a verdict")
        env = worker_env(sqlite_workers)
        cancelled = CliRunner().invoke(cli, ["cancel", batch_id], env=env)
        assert cancelled.output.strip() == f"{batch_id}: cancelled"
        wait_for(lambda: queue_idle(sqlite_workers), 60, "the queue to drain", poll=0.2)

        status = batch_status(sessions, batch_id)
        assert status.status == BatchState.CANCELLED and status.n_verdicts < status.n_cells
        calls_before = simulator_calls(slow)
        assert calls_before < expected  # skipped tasks made no call
        assert (
            json.loads(jury(["status", batch_id, "--json"], env, tmp_path).stdout)["status"]
            == "cancelled"
        )

        resumed = jury(["resume", batch_id, "--wait"], env, tmp_path)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert_exactly_once(sqlite_workers, batch_id)
        assert simulator_calls(slow) == expected  # nothing judged twice, nothing skipped
    finally:
        slow.stop()


def test_budget_cap_stops_new_calls_and_resume_raises_it(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    # Prices of our own for the simulator's model: each call costs about $0.3.
    judges = [
        {
            "model": "openai/balanced",
            "n": 4,
            "input_cost_per_token": 0.001,
            "output_cost_per_token": 0.001,
        }
    ]
    # No result cache: answers cached by earlier tests would cost nothing and blur the count.
    batch = write_batch(tmp_path, simulator, judges, max_cost_usd=1.0, cache=False)
    env = worker_env(sqlite_workers)
    done = jury(["submit", str(batch), "--wait", "--timeout", "60"], env, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr  # stopped, not completed
    batch_id = done.stdout.strip().splitlines()[-1]
    sessions = session_factory(sqlite_workers.database_url)
    wait_for(lambda: queue_idle(sqlite_workers), 60, "the queue to drain", poll=0.2)
    status = batch_status(sessions, batch_id)
    assert status.status == BatchState.STOPPED
    assert status.error and "budget reached" in status.error and "max_cost_usd $1" in status.error
    stored = stored_cost(sessions, batch_id)
    calls = stored_samples(sessions, batch_id)
    # Each call reserved its estimate (its whole max_tokens as answer) before it was sent:
    # the batch stops at the call that could pass the cap, never past it…
    assert 0 < stored <= 1.0 and calls < 40
    # …and the stored reason says what was really spent.
    assert f"${stored:.4f} spent" in status.error
    shown = jury(["status", batch_id], env, tmp_path).stdout
    assert "stopped" in shown and "budget reached" in shown

    resumed = jury(["resume", batch_id, "--max-cost-usd", "100", "--wait"], env, tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert_exactly_once(sqlite_workers, batch_id)
    assert batch_status(sessions, batch_id).cost_usd == pytest.approx(
        stored_cost(sessions, batch_id)
    )


def stored_samples(sessions: object, batch_id: str) -> int:
    from sqlalchemy import func, select

    from jury.store.models import SampleRow

    with sessions() as session:  # type: ignore[operator]
        count: int = session.scalar(
            select(func.count()).select_from(SampleRow).where(SampleRow.batch_id == batch_id)
        )
    return count
