"""Two deployments on one Redis never meet: the same batch id, the same judges, each its own
queue and database, run side by side; each completes, spending only its own budget."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from jury.batchfile.loading import load_batch
from jury.broker import keys as redis_keys
from jury.broker.budget import BudgetMeter
from jury.broker.redis_client import BrokerRedis
from jury.local.services import ManagedProcess, wait_for
from jury.producer.publishing import create_producer_app
from jury.producer.submission import submit_batch
from jury.settings import Settings
from jury.store.engine import session_factory
from jury.store.repository import batch_status
from jury.store.samples import stored_cost
from tests.conftest import WorkerStarter, settings_for
from tests.integration.test_faults import assert_exactly_once
from tests.integration.test_pipeline import write_batch

pytestmark = pytest.mark.integration

JUDGE = {
    "model": "openai/balanced",
    "n": 2,
    "input_cost_per_token": 1e-5,
    "output_cost_per_token": 1e-5,
    "max_tokens": 64,
}


def run(settings: Settings, batch: Path, batch_id: str) -> float:
    sessions = session_factory(settings.database_url)
    submit_batch(load_batch(batch), sessions, create_producer_app(settings), batch_id)
    wait_for(lambda: batch_status(sessions, batch_id).status.finished, 90, "the batch to end")
    assert_exactly_once(settings, batch_id)
    return stored_cost(sessions, batch_id)


def has_meter(settings: Settings, batch_id: str) -> bool:
    broker = BrokerRedis.from_settings(settings)
    try:
        keys = redis_keys.budget(settings.queue, batch_id)
        return bool(broker.client.exists(*(broker.key(k) for k in keys)))
    finally:
        broker.close()


def metered(settings: Settings, batch_id: str, stored: float = -1.0) -> float:
    """The deployment's meter of the batch; where it has none, it is made from `stored`."""
    broker = BrokerRedis.from_settings(settings)
    try:
        meter = BudgetMeter(broker, settings.queue, lambda _: stored)
        return meter.read(batch_id, None).spent_usd
    finally:
        broker.close()


def test_two_deployments_with_one_batch_id_never_meet(
    tmp_path: Path,
    redis_url: str,
    simulator: ManagedProcess,
    sqlite_workers: Settings,
    start_workers: WorkerStarter,
) -> None:
    batch_id = f"nightly-{secrets.token_hex(3)}"
    first = tmp_path / "first"
    first.mkdir()
    batch = write_batch(first, simulator, [dict(JUDGE)], max_cost_usd=1.0)
    spent_first = run(sqlite_workers, batch, batch_id)
    # A batch's meter goes with the batch; this one stands for it still running, as a
    # shared meter would be seen by the other deployment.
    wait_for(lambda: not has_meter(sqlite_workers, batch_id), 10, "the meter to go")
    assert metered(sqlite_workers, batch_id, stored=spent_first) == pytest.approx(spent_first)

    # The other deployment: its own queue and database, the same Redis, the same batch id,
    # and a cap that holds its own batch but not both: a shared meter would stop it midway.
    other = settings_for(redis_url, f"sqlite:///{tmp_path / 'other.db'}")
    start_workers(other)
    second = tmp_path / "second"
    second.mkdir()
    batch = write_batch(second, simulator, [dict(JUDGE)], max_cost_usd=1.6 * spent_first)
    spent_second = run(other, batch, batch_id)

    assert spent_second == pytest.approx(spent_first, rel=0.2)  # the same work, its own cost
    wait_for(lambda: not has_meter(other, batch_id), 10, "its meter to go with it")
    assert metered(sqlite_workers, batch_id) == pytest.approx(spent_first)  # untouched
