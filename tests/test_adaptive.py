"""Adaptive sampling through real workers and the simulator: a first round per cell, and
every sample (plus the reserve judge) only for the cells it leaves uncertain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.common import simulator_stats
from producer.services import ManagedProcess
from schemas.settings import Settings
from store.cells import iter_verdicts
from store.engine import session_factory
from store.repository import batch_status
from tests.conftest import worker_env
from tests.test_cli import jury
from tests.test_pipeline import run_batch, write_batch

pytestmark = pytest.mark.integration
MAX_STD = 0.5


def test_adaptive_batch_escalates_only_uncertain_cells(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    settings = sqlite_workers
    tag = settings.queue.removeprefix("jury-test-") + tmp_path.name[-4:].replace("_", "")
    # The contrarian persona disagrees with the others on about a third of the cells.
    judges = [
        {"model": f"openai/balanced@a{tag}", "n": 3},
        {"model": f"openai/contrarian@a{tag}", "n": 3},
        {"model": f"openai/strict@a{tag}", "n": 2, "reserve": True},
    ]
    batch = write_batch(
        tmp_path,
        simulator,
        judges,
        adaptive={"initial_samples": 1, "max_std": MAX_STD},
        cache=False,
    )
    batch_id = run_batch(settings, batch)
    sessions = session_factory(settings.database_url)
    status = batch_status(sessions, batch_id)

    escalated = certain = 0
    for verdict in iter_verdicts(sessions, batch_id):
        sizes = {
            name.split("/")[1].split("@")[0]: len(e.samples) + e.n_failed
            for name, e in verdict.llm_evaluations.items()
        }
        if sizes == {"balanced": 3, "contrarian": 3, "strict": 2}:
            escalated += 1
        else:
            # Kept after the first round: one sample each, and the judges agreed.
            assert sizes == {"balanced": 1, "contrarian": 1}, sizes
            assert (verdict.consensus_metrics.cross_model_std or 0) <= MAX_STD
            certain += 1
    print(f"\nadaptive: {escalated} of {status.n_cells} cells escalated")
    assert escalated == status.n_escalated > 0
    assert certain > 0
    assert escalated + certain == status.n_cells

    # Every call made is a stored sample, and the calls not needed were never made.
    models = simulator_stats(simulator)["models"]
    calls = sum(
        int(models.get(f"{persona}@a{tag}", {}).get("200", 0))
        for persona in ("balanced", "contrarian", "strict")
    )
    assert calls == status.n_samples == certain * 2 + escalated * 8
    assert status.n_samples < status.n_samples_expected
    assert status.status.value == "completed" and status.n_verdicts == status.n_cells

    shown = jury(["results", batch_id, "--format", "json"], worker_env(settings), tmp_path)
    figures = json.loads(shown.stdout)["summary"]["adaptive"]
    assert figures == {
        "cap": status.n_samples_expected,
        "calls": calls,
        "saved": status.n_samples_expected - calls,
        "escalated_cells": escalated,
        "cells": status.n_cells,
    }
