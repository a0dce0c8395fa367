"""`jury worker --processes 2`: one parent that loaded LiteLLM, two forked workers sharing it;
a worker killed in the middle of a batch is replaced and nothing is lost or doubled; SIGTERM
stops them all."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from jury.batchfile.loading import load_batch
from jury.local.services import start_simulator, start_worker, wait_for
from jury.producer.publishing import create_producer_app
from jury.producer.submission import submit_batch
from jury.store.engine import session_factory
from jury.store.repository import batch_status
from tests.conftest import settings_for, worker_env
from tests.integration.test_faults import assert_exactly_once
from tests.integration.test_pipeline import write_batch

pytestmark = pytest.mark.integration


def test_forked_workers_share_a_batch_and_survive_a_kill(tmp_path: Path, redis_url: str) -> None:
    slow = start_simulator(tmp_path, ["--latency-ms", "400", "--latency-sigma", "0.1"])
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}").model_copy(
        update={"heartbeat_timeout_s": 5.0, "worker_concurrency": 8}
    )
    app = create_producer_app(settings)
    node = f"jury-test-forked-{settings.queue}@localhost"
    nodes = [node.replace("@", "-1@"), node.replace("@", "-2@")]
    parent = start_worker(tmp_path, worker_env(settings), node, extra=["--processes", "2"])
    try:

        def both_answer() -> bool:
            assert parent.alive(), parent.log_tail()
            return len(app.control.ping(destination=nodes, timeout=0.5)) == 2

        wait_for(both_answer, 180, "two forked workers", poll=0.3)
        children = psutil.Process(parent.process.pid).children()
        assert len(children) == 2
        # They share the parent's pages: each maps far more than it holds alone.
        for child in children:
            memory = child.memory_full_info()
            assert memory.pss < 0.8 * memory.rss, (memory.pss, memory.rss)

        judges = [{"model": "openai/balanced", "n": 3}, {"model": "openai/strict", "n": 3}]
        sessions = session_factory(settings.database_url)
        batch_id = submit_batch(load_batch(write_batch(tmp_path, slow, judges)), sessions, app)
        wait_for(lambda: batch_status(sessions, batch_id).n_verdicts >= 2, 60, "first verdicts")
        victim = children[0]
        victim.kill()  # SIGKILL, in the middle of the batch
        victim.wait(10)

        def replaced() -> bool:
            now = psutil.Process(parent.process.pid).children()
            return len(now) == 2 and victim.pid not in {c.pid for c in now}

        wait_for(replaced, 30, "a new worker process", poll=0.2)
        wait_for(both_answer, 180, "the replacement to answer under the same name", poll=0.3)
        wait_for(lambda: batch_status(sessions, batch_id).status.finished, 120, "the batch", 0.2)
        assert_exactly_once(settings, batch_id)
        log = parent.log_tail(10**6)
        assert "was killed by SIGKILL: starting another" in log
        assert "ForkPoolWorker" not in log  # the engine pool, not Celery's prefork

        processes = psutil.Process(parent.process.pid).children()
        parent.process.send_signal(signal.SIGTERM)
        assert parent.process.wait(30) == 0
        _, alive = psutil.wait_procs(processes, timeout=10)
        assert not alive, [p.pid for p in alive]
        assert "SIGTERM: stopping 2 processes" in parent.log_tail(200)
    finally:
        parent.stop(grace=5)
        slow.stop()


@pytest.mark.slow  # half a minute of two workers' start; the restart rules have unit tests
def test_a_worker_that_cannot_start_stops_the_others(tmp_path: Path, redis_url: str) -> None:
    """A child that fails at its start (here: a database it cannot open) fails the same way
    again: the parent stops the other and exits with its status, instead of forking in a loop."""
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'no' / 'such' / 'folder.db'}")
    started = time.monotonic()
    done = subprocess.run(
        [*_python_m_jury_worker(), "--processes", "2"],
        env=worker_env(settings),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode != 0, done.stderr[-2000:]
    assert "after its start: stopping the others" in done.stderr, done.stderr[-2000:]
    assert time.monotonic() - started < 170


def _python_m_jury_worker() -> list[str]:
    from jury.local.services import python_module

    return python_module("jury.worker")


def test_processes_must_be_a_count(tmp_path: Path, redis_url: str) -> None:
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    done = subprocess.run(
        [*_python_m_jury_worker(), "--processes", "many"],
        env={**worker_env(settings), "PATH": os.environ.get("PATH", "")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "jury worker: bad configuration" in done.stderr
    assert "worker_processes" in done.stderr
