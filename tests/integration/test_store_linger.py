"""A throttled judge's samples wait a moment in the worker's store group (jury.worker.judging
.pipeline.stores) so that they share a transaction. A worker killed while it holds answered
samples not yet stored loses nothing and doubles nothing: its tasks come back to another
worker, which calls and stores them, each sample stored once."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from sqlalchemy import func, select

from bench.common import simulator_stats
from jury.batchfile.loading import load_batch
from jury.local.services import start_simulator, wait_for
from jury.producer.publishing import create_producer_app
from jury.producer.submission import submit_batch
from jury.store.engine import session_factory
from jury.store.models import SampleRow
from jury.store.repository import batch_status
from tests.conftest import WorkerStarter, settings_for
from tests.integration.test_faults import assert_exactly_once
from tests.integration.test_pipeline import ITEMS, write_batch

pytestmark = pytest.mark.integration


def test_a_worker_killed_with_samples_in_its_store_group_loses_nothing(
    tmp_path: Path, redis_url: str, start_workers: WorkerStarter
) -> None:
    provider = start_simulator(tmp_path, ["--latency-ms", "0", "--latency-sigma", "0"])
    try:
        settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}").model_copy(
            update={"heartbeat_timeout_s": 5.0}
        )
        (victim,) = start_workers(settings)
        # One dimension: one call per sample. 4 × 5 samples a slot apart (0.25 s): each
        # answered at once, then held in the store group for company.
        model = "openai/balanced"
        judges = [{"model": model, "n": 4, "rpm": 240}]
        batch = write_batch(tmp_path, provider, judges, dimensions=["relevance"])
        sessions = session_factory(settings.database_url)
        batch_id = submit_batch(load_batch(batch), sessions, create_producer_app(settings))

        def stored() -> int:
            with sessions() as session:
                query = select(func.count()).where(SampleRow.batch_id == batch_id)
                return int(session.scalar(query.select_from(SampleRow)) or 0)

        def answered() -> int:
            return int(simulator_stats(provider)["models"].get("balanced", {}).get("200", 0))

        # Answered (a reply at once: no latency) yet not stored: waiting in the group.
        wait_for(lambda: answered() - stored() >= 2, 60, "answered samples not stored yet", 0.01)
        unstored = answered() - stored()
        os.kill(victim.process.pid, signal.SIGKILL)
        start_workers(settings)
        wait_for(lambda: batch_status(sessions, batch_id).status.finished, 120, "the batch")
        assert_exactly_once(settings, batch_id)
        assert stored() == len(ITEMS) * 4
        # The killed worker's answered samples were called again, once each at most.
        assert answered() >= stored() + 1
        assert unstored >= 2
    finally:
        provider.stop()
