"""Streaming submission at scale, with real processes: back-pressure bounds what Redis holds,
and a producer killed mid-submission is continued by `jury resume` without queuing anything
twice."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
import redis

from bench.common import simulator_stats
from jury.broker.keys import submit_cursor
from jury.local.services import ManagedProcess, wait_for
from jury.schemas.status import BatchState
from jury.settings import Settings
from jury.store.engine import session_factory
from jury.store.repository import batch_status
from tests.conftest import WorkerStarter, queued_messages, settings_for, worker_env
from tests.integration.test_cli import JURY, jury
from tests.integration.test_faults import assert_exactly_once

pytestmark = pytest.mark.integration

N_ITEMS = 60
MAX_QUEUED = 40
WAVE = 10  # tasks; 2 per item: 5 items per wave


def _write_batch(folder: Path, simulator: ManagedProcess, model: str) -> Path:
    items = "".join(
        json.dumps({"id": f"item-{n:03d}", "output": f"answer number {n}"}) + "\n"
        for n in range(N_ITEMS)
    )
    (folder / "items.jsonl").write_text(items)
    batch = folder / "batch.yaml"
    batch.write_text(
        f"name: waves\njudges: [{{model: {model}, n: 2, api_base: '{simulator.url}'}}]\n"
        "dimensions: [relevance]\nitems: items.jsonl\n"
    )
    return batch


def bounded_settings(redis_url: str, tmp_path: Path) -> Settings:
    """A deployment of this test's own whose queues hold at most MAX_QUEUED tasks."""
    return settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}").model_copy(
        update={"max_queued_tasks": MAX_QUEUED, "publish_wave": WAVE}
    )


def start_producer(
    batch: Path, batch_id: str, env: dict[str, str], cwd: Path
) -> subprocess.Popen[bytes]:
    """`jury submit` as a process of its own, to be killed or raced."""
    return subprocess.Popen(
        [*JURY, "submit", str(batch), "--batch-id", batch_id, "--quiet"],
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def test_backpressure_and_a_killed_producer_resumed(
    tmp_path: Path, redis_url: str, simulator: ManagedProcess, start_workers: WorkerStarter
) -> None:
    settings = bounded_settings(redis_url, tmp_path)
    env = worker_env(settings)
    tag = settings.queue.removeprefix("jury-test-")
    model = f"openai/balanced@{tag}"  # this test's calls, counted apart at the simulator
    batch = _write_batch(tmp_path, simulator, model)
    batch_id = f"waves-{tag}"
    sessions = session_factory(settings.database_url)

    # No worker yet: the producer fills the queues up to the bound and waits there.
    producer = start_producer(batch, batch_id, env, tmp_path)
    try:
        client = redis.Redis.from_url(redis_url)

        def waiting_at_the_bound() -> bool:
            cursor = int(client.get(submit_cursor(settings.queue, batch_id)) or 0)
            return cursor > 0 and len(queued_messages(settings)) + WAVE > MAX_QUEUED

        wait_for(waiting_at_the_bound, 60, "the producer to fill the queues to the bound")
        queued = len(queued_messages(settings))
        assert queued <= MAX_QUEUED
        status = batch_status(sessions, batch_id)
        assert status.status == BatchState.SUBMITTING
        assert status.n_items == N_ITEMS and status.n_items_published * 2 == queued
        producer.send_signal(signal.SIGKILL)
        producer.wait(timeout=10)
    finally:
        if producer.poll() is None:
            producer.kill()

    start_workers(settings, count=1)
    resumed = jury(["resume", batch_id, "--wait"], env, tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "submission continued" in resumed.stdout
    assert_exactly_once(settings, batch_id)
    # Every judge task was queued once: one call per sample, none twice.
    calls = simulator_stats(simulator)["models"][f"balanced@{tag}"]
    assert calls.get("200") == N_ITEMS * 2, calls
    assert client.get(submit_cursor(settings.queue, batch_id)) is None


def test_resume_refuses_a_batch_another_producer_is_submitting(
    tmp_path: Path, redis_url: str, simulator: ManagedProcess
) -> None:
    settings = bounded_settings(redis_url, tmp_path)
    env = worker_env(settings)
    tag = settings.queue.removeprefix("jury-test-")
    batch = _write_batch(tmp_path, simulator, f"openai/balanced@{tag}")
    batch_id = f"busy-{tag}"
    producer = start_producer(batch, batch_id, env, tmp_path)
    try:
        wait_for(lambda: len(queued_messages(settings)) > 0, 30, "the first wave")
        second = jury(["resume", batch_id], env, tmp_path)
        assert second.returncode != 0
        assert "another producer" in second.stderr and "is submitting" in second.stderr
        assert len(queued_messages(settings)) <= MAX_QUEUED
    finally:
        producer.kill()
        producer.wait(timeout=10)
        queued_messages(settings, drain=True)


def test_a_config_that_does_not_read_back_as_stored_is_refused_before_anything_is_queued(
    tmp_path: Path, redis_url: str, simulator: ManagedProcess
) -> None:
    """The stored form of the config is read back before anything is recorded or queued: a
    difference between the config as loaded and as the workers will read it (here a GET
    candidate with a body, built around the validator) leaves no batch `submitting` and no
    task queued."""
    from dataclasses import replace

    from jury.batchfile.loading import load_batch
    from jury.errors import BatchFileError
    from jury.producer.publishing import create_producer_app
    from jury.producer.submission import submit_batch
    from jury.schemas.candidates import HTTPCandidate
    from jury.store.inspection import recent_batches

    settings = bounded_settings(redis_url, tmp_path)
    source = load_batch(_write_batch(tmp_path, simulator, "openai/balanced"))
    forged = HTTPCandidate.model_construct(
        name="bot", url="http://127.0.0.1:9/q", method="GET", body={"q": "x"}, headers={}
    )
    config = source.config.model_copy(update={"candidates": [forged]})
    sessions = session_factory(settings.database_url)
    with pytest.raises(BatchFileError, match=r"as stored: .*a GET request has no body"):
        submit_batch(replace(source, config=config), sessions, create_producer_app(settings))
    assert recent_batches(sessions) == []
    assert queued_messages(settings) == []
