"""The adaptive window with a real worker, Redis and the simulator over HTTP: against a slow
judge the window grows past its start, the worker holds more calls at once than it started
with, says so in its log, publishes it with its heartbeat, and `jury status` shows it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.common import simulator_stats
from bench.scaling import write_batch
from jury.batchfile.loading import load_batch
from jury.broker.census import worker_windows
from jury.broker.redis_client import BrokerRedis
from jury.cli.batches import windows_line
from jury.local.services import ManagedProcess, start_simulator, wait_for
from jury.producer.publishing import create_producer_app
from jury.producer.submission import submit_batch
from jury.store.engine import session_factory
from jury.store.repository import batch_status
from tests.conftest import WorkerStarter, settings_for
from tests.integration.test_faults import assert_exactly_once

pytestmark = pytest.mark.integration

START = 8


@pytest.fixture
def slow_simulator(tmp_path: Path) -> Iterator[ManagedProcess]:
    process = start_simulator(tmp_path, ["--latency-ms", "1000", "--latency-sigma", "0"])
    yield process
    process.stop()


def test_the_window_grows_past_its_start_against_a_slow_judge(
    tmp_path: Path, redis_url: str, start_workers: WorkerStarter, slow_simulator: ManagedProcess
) -> None:
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}").model_copy(
        update={"worker_concurrency": 256, "worker_window": START, "heartbeat_timeout_s": 6.0}
    )
    (worker,) = start_workers(settings)
    batch, _ = write_batch(tmp_path, slow_simulator.url, 600)
    sessions = session_factory(settings.database_url)
    batch_id = submit_batch(load_batch(batch), sessions, create_producer_app(settings))
    broker = BrokerRedis.from_settings(settings)
    seen: list[int] = []

    def grown() -> bool:
        windows = worker_windows(broker, settings)
        seen.extend(w.window for w in windows)
        return any(w.window >= 4 * START for w in windows)

    try:
        # At a fixed window of 8 the batch would take 75 s: the window grows in seconds.
        wait_for(grown, 60, "the window to grow", poll=0.2)
        line = windows_line(worker_windows(broker, settings))
        wait_for(lambda: batch_status(sessions, batch_id).status.finished, 120, "the batch")
    finally:
        broker.close()
    assert line is not None and line.startswith("workers: 1 alive, window ") and "of 256" in line
    assert_exactly_once(settings, batch_id)
    assert batch_status(sessions, batch_id).n_failed_samples == 0
    assert simulator_stats(slow_simulator)["max_in_flight"] > START
    assert worker.log_path is not None
    lines = [n for n in worker.log_path.read_text().splitlines() if "] window " in n]
    assert f"window {START} tasks in flight (adapts up to 256" in lines[0], lines
    assert any("calls waiting, CPU to spare" in line for line in lines[1:]), lines
