"""More of the Batch API end to end: the live fallback and `jury cancel`. Each starts a worker
of its own (about 10 s), beyond the ~25 s the Batch API may add to `make test`, so they run
only with `make test-slow` (JURY_TEST_SLOW=1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jury.local.services import wait_for
from jury.producer.control import cancel_batch
from jury.schemas.status import BatchState
from jury.store.engine import session_factory
from jury.store.provider_batches import provider_batches
from tests.conftest import WorkerStarter, settings_for
from tests.integration.test_batch_api import (  # noqa: F401 (sim_factory: a fixture)
    FAST,
    ITEMS,
    sample_keys,
    sim_factory,
    submit,
    wait_finished,
)
from tests.integration.test_pipeline import write_batch

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_failed_lines_go_live_with_batch_fallback_live(
    redis_url: str,
    tmp_path: Path,
    start_workers: WorkerStarter,
    sim_factory: Any,  # noqa: F811
) -> None:
    """Half the lines fail: with `batch_fallback_live` they are called live, not batched
    again; every sample is stored once, from one provider batch."""
    sim = sim_factory("--batch-delay", "0.3", "--batch-error-rate", "0.5")
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    start_workers(settings, 1, **FAST)
    judges = [{"model": "openai/lenient", "n": 2, "batch_api": True, "batch_fallback_live": True}]
    batch_id = submit(settings, write_batch(tmp_path, sim, judges))
    assert wait_finished(settings, batch_id, 60) == BatchState.COMPLETED
    keys = sample_keys(settings, batch_id)
    assert len(keys) == len(ITEMS) * 2 * 2 and set(keys.values()) == {1}
    sessions = session_factory(settings.database_url)
    (only,) = provider_batches(sessions, batch_id)
    assert only.failed > 0 and len(provider_batches(sessions, batch_id)) == 1


def test_jury_cancel_cancels_the_open_provider_batches(
    redis_url: str,
    tmp_path: Path,
    start_workers: WorkerStarter,
    sim_factory: Any,  # noqa: F811
) -> None:
    sim = sim_factory("--batch-delay", "600")
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    start_workers(settings, 1, **FAST)
    judges = [{"model": "openai/lenient", "n": 1, "batch_api": True}]
    batch_id = submit(settings, write_batch(tmp_path, sim, judges))
    sessions = session_factory(settings.database_url)
    wait_for(lambda: any(b.provider_id for b in provider_batches(sessions, batch_id)), 30, "sent")
    cancel_batch(sessions, batch_id)
    wait_for(
        lambda: all(b.state == "stored" for b in provider_batches(sessions, batch_id)),
        30,
        "the provider batch cancelled",
    )
    assert provider_batches(sessions, batch_id)[0].provider_status == "cancelled"
