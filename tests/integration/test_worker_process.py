"""`jury worker` as a process: what it says when it starts, and its name among others."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jury.local.services import ManagedProcess, wait_for
from jury.producer.publishing import create_producer_app
from tests.conftest import settings_for, stop_workers, worker_env

pytestmark = pytest.mark.integration
# The default name of a worker started without -n (other tests name theirs jury-test-…).
PLAIN = re.compile(r"^jury-\d+@")


def test_two_plain_workers_on_one_host_get_distinct_names(tmp_path: Path, redis_url: str) -> None:
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    jury = str(Path(sys.executable).parent / "jury")
    processes = []
    for n in range(2):
        log = tmp_path / f"worker{n}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [jury, "worker"], env=worker_env(settings), stdout=out, stderr=subprocess.STDOUT
            )
        processes.append(ManagedProcess(f"worker{n}", process, log))
    try:
        app = create_producer_app(settings)
        names: set[str] = set()

        def both_answer() -> bool:
            names.update(name for reply in app.control.ping(timeout=0.5) for name in reply)
            return len([n for n in names if PLAIN.match(n)]) >= 2

        wait_for(both_answer, 60, "two workers to answer a ping", poll=0.3)
        ours = sorted(n for n in names if PLAIN.match(n))
        assert len(ours) == len(set(ours)) == 2
        # The start-up line says what runs, for bug reports.
        assert "jury worker: jury " in processes[0].log_tail(200)
        assert "celery 5." in processes[0].log_tail(200)
        # Warmed up before it takes tasks (or answers a ping): not as the first tasks come.
        tail = processes[0].log_tail(400)
        assert 0 <= tail.index("warmed up in ") < tail.index(" ready.")
    finally:
        stop_workers(processes)


def test_celerys_own_command_line_runs_a_worker(tmp_path: Path, redis_url: str) -> None:
    """`celery -A jury.worker worker` with the engine pool, as Celery's users run workers."""
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    celery = str(Path(sys.executable).parent / "celery")
    node = f"plain-celery-{settings.queue}@localhost"
    env = worker_env(settings, CELERY_CUSTOM_WORKER_POOL="jury.worker.engine.pool:EnginePool")
    log = tmp_path / "celery.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                celery,
                "-A",
                "jury.worker",
                "worker",
                "--pool",
                "custom",
                "-n",
                node,
                "--queues",
                ",".join(settings.all_queues),
                "--without-gossip",
                "--without-mingle",
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
        )
    worker = ManagedProcess("celery", process, log)
    try:
        app = create_producer_app(settings)
        wait_for(lambda: bool(app.control.ping(destination=[node], timeout=0.5)), 60, "the worker")
        stats = app.control.inspect(destination=[node], timeout=2).stats() or {}
        assert stats[node]["pool"]["implementation"] == "jury.worker.engine.pool:EnginePool"
    finally:
        stop_workers([worker])


def _jury_worker(env: dict[str, str], timeout: float) -> tuple[int, str, float]:
    """`jury worker` run to its end: (exit code, what it printed, seconds it took)."""
    jury = str(Path(sys.executable).parent / "jury")
    started = time.monotonic()
    done = subprocess.run(
        [jury, "worker"], env=env, capture_output=True, text=True, timeout=timeout
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - started


def test_a_worker_without_a_usable_broker_says_so_in_one_paragraph(tmp_path: Path) -> None:
    """A broker that is not Redis is refused at once (exit 2); a Redis that does not answer
    gets one line per attempt naming where its URL came from, and the worker gives up at
    JURY_BROKER_WAIT (exit 1). Neither logs a traceback or starts Celery."""
    database = {"JURY_DATABASE_URL": f"sqlite:///{tmp_path / 'jury.db'}"}
    amqp = {**os.environ, **database, "JURY_BROKER_URL": "amqp://guest:guest@127.0.0.1:1//"}
    code, said, took = _jury_worker(amqp, 60)
    assert code == 2 and took < 30, said
    assert said.count("\n") == 1 and "is amqp; jury needs Redis" in said
    assert "(JURY_BROKER_URL)" in said and "Traceback" not in said

    nowhere = {**amqp, "JURY_BROKER_URL": "redis://127.0.0.1:1/0", "JURY_BROKER_WAIT": "3"}
    code, said, took = _jury_worker(nowhere, 60)
    lines = said.strip().splitlines()
    assert code == 1 and took < 3 + 20, said  # 3 s of waiting, and Python's start
    assert len(lines) >= 3 and lines[-1].startswith("jury worker: cannot reach Redis")
    assert "Gave up after" in lines[-1] and "JURY_BROKER_WAIT" in lines[-1]
    assert all("(JURY_BROKER_URL)" in line for line in lines if "jury worker: cannot" in line)
    assert "Traceback" not in said and "celery@" not in said
