"""The producer's pacing of rate-limited judges (jury.producer.pacing), end to end: real
Redis, the shared worker processes, the simulator over HTTP, and `jury cancel`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from jury.batchfile.loading import load_batch
from jury.broker.keys import PARKED
from jury.broker.redis_client import BrokerRedis
from jury.cli.main import jury as cli
from jury.local.services import ManagedProcess, wait_for
from jury.producer.publishing import create_producer_app
from jury.producer.submission import submit_batch
from jury.schemas.status import BatchState
from jury.settings import Settings
from jury.store.engine import session_factory
from jury.store.repository import batch_status
from tests.conftest import queue_idle, worker_env
from tests.integration.test_pipeline import write_batch


@pytest.mark.integration
def test_the_producer_parks_what_the_quota_has_no_room_for_yet(
    tmp_path: Path, simulator: ManagedProcess, sqlite_workers: Settings
) -> None:
    """160 tasks for a judge allowed 1200 calls a minute: about 8 s of its quota, beyond the
    workers' 6 s horizon. The producer queues the first horizon's worth and parks the rest
    itself, each due half a horizon before its slot, instead of leaving the workers to take
    each one, find its slot too far and park it, and each carries when it was parked. They
    all come back and are judged."""
    batch = write_batch(
        tmp_path, simulator, [{"model": "openai/balanced@paced", "n": 16, "rpm": 1200}]
    )
    spec = yaml.safe_load(batch.read_text())
    batch.write_text(yaml.safe_dump({**spec, "cache": False}))
    sessions = session_factory(sqlite_workers.database_url)
    broker = BrokerRedis.from_settings(sqlite_workers)
    try:
        batch_id = submit_batch(load_batch(batch), sessions, create_producer_app(sqlite_workers))
        parked = broker.client.zrange(broker.key(PARKED), 0, -1)
        ours = [member for member in parked if batch_id.encode() in member]
        assert len(ours) >= 30
        # Waiting for a slot from the submission on (counted against a `max_wait_s`).
        assert all(b"parked_at" in member for member in ours)
        wait_for(lambda: batch_status(sessions, batch_id).status.finished, 60, "the batch")
        status = batch_status(sessions, batch_id)
        assert (status.n_samples, status.n_failed_samples) == (160, 0)
    finally:
        broker.close()


@pytest.mark.integration
def test_cancelling_a_paced_batch_drops_its_parked_tasks(
    tmp_path: Path, simulator: ManagedProcess, sqlite_workers: Settings
) -> None:
    """A cancelled batch's tasks parked until their slots (here by the producer's pacing)
    would come back only to be skipped, holding up other submissions meanwhile: `jury
    cancel` drops them, and `jury resume` would queue them again."""
    batch = write_batch(
        tmp_path, simulator, [{"model": "openai/balanced@cancelled", "n": 16, "rpm": 600}]
    )
    sessions = session_factory(sqlite_workers.database_url)
    broker = BrokerRedis.from_settings(sqlite_workers)

    def parked() -> int:
        members = broker.client.zrange(broker.key(PARKED), 0, -1)
        return sum(batch_id.encode() in member for member in members)

    try:
        batch_id = submit_batch(load_batch(batch), sessions, create_producer_app(sqlite_workers))
        assert parked() >= 60  # 160 tasks at 10 a second: the first 6 s queued, the rest parked
        cancelled = CliRunner().invoke(cli, ["cancel", batch_id], env=worker_env(sqlite_workers))
        assert cancelled.exit_code == 0, cancelled.output
        assert "tasks waiting for a rate-limit slot dropped" in cancelled.output
        assert parked() == 0
        wait_for(lambda: queue_idle(sqlite_workers), 60, "the queue to drain", poll=0.2)
        assert batch_status(sessions, batch_id).status == BatchState.CANCELLED
    finally:
        broker.close()
