"""End to end with real parts: Redis, `python -m worker` processes, the simulator over HTTP,
and SQLite or PostgreSQL. Stored records are checked against the stored raw samples."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from rich.console import Console

from jury.batchfile.loading import load_batch
from jury.local.services import ManagedProcess, wait_for
from jury.producer.following import follow_batch
from jury.producer.publishing import create_producer_app
from jury.producer.submission import submit_batch
from jury.schemas.results import Level, Verdict
from jury.schemas.status import BatchState
from jury.schemas.tasks import CellRef
from jury.settings import Settings
from jury.store.cells import iter_verdicts
from jury.store.engine import session_factory
from jury.store.repository import batch_status
from jury.store.samples import list_samples

pytestmark = pytest.mark.integration

ITEMS = [
    {"id": f"item-{i}", "input": f"Question {i}?", "output": f"Answer number {i} " * (i + 1)}
    for i in range(5)
]


def write_batch(
    folder: Path, simulator: ManagedProcess, judges: list[dict[str, Any]], **extra: Any
) -> Path:
    for judge in judges:
        judge.setdefault("api_base", simulator.url)
    spec = {
        "name": "pipeline-test",
        "judges": judges,
        "dimensions": [
            "relevance",
            {
                "name": "tone",
                "description": "Is it kind?",
                "scale": {"min": 1, "max": 10},
                "threshold": 6,
            },
        ],
        "aggregation": {
            "within_model": "mean",
            "across_models": "mean",
            "consensus_threshold": 1.0,
        },
        "items": "items.jsonl",
        **extra,
    }
    (folder / "items.jsonl").write_text("".join(json.dumps(item) + "\n" for item in ITEMS))
    path = folder / "batch.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def run_batch(
    settings: Settings,
    batch_file: Path,
    timeout: float = 90,
    ends: BatchState = BatchState.COMPLETED,
) -> str:
    """Submit and follow the batch; it must end as `ends` (degraded when a judge failed)."""
    sessions = session_factory(settings.database_url)
    batch_id = submit_batch(load_batch(batch_file), sessions, create_producer_app(settings))
    status = follow_batch(sessions, batch_id, Console(quiet=True), timeout=timeout)
    assert status is not None, f"batch {batch_id} did not finish in {timeout} s"
    assert status.status == ends
    return batch_id


def check_record_against_samples(
    settings: Settings, batch_id: str, verdict: Verdict, threshold: float
) -> None:
    """Recompute the verdict from the stored raw samples: the two-stage rules of docs/results.md."""
    sessions = session_factory(settings.database_url)
    raw = list_samples(sessions, CellRef(batch_id, verdict.item_id, verdict.criterion_id))
    per_judge: dict[str, list[float]] = {}
    for sample in sorted(raw, key=lambda s: (s.judge, s.sample)):
        if sample.score is not None:
            per_judge.setdefault(sample.judge, []).append(sample.score)
    for judge, evaluation in verdict.llm_evaluations.items():
        scores = per_judge.get(judge, [])
        assert evaluation.samples == scores
        if scores:
            assert evaluation.aggregated_score == pytest.approx(statistics.fmean(scores))
            expected_std = statistics.stdev(scores) if len(scores) > 1 else 0.0
            assert evaluation.within_model_std == pytest.approx(expected_std)
    means = [statistics.fmean(s) for s in per_judge.values() if s]
    metrics = verdict.consensus_metrics
    assert metrics.final_score is not None
    assert metrics.final_score == pytest.approx(statistics.fmean(means))
    cross = statistics.stdev(means) if len(means) > 1 else 0.0
    assert metrics.cross_model_std == pytest.approx(cross)
    expected_level = Level.HIGH if cross < 0.5 else Level.PARTIAL if cross <= 1.0 else Level.LOW
    assert metrics.consensus_level == expected_level
    assert verdict.passed == (metrics.final_score >= threshold)
    assert verdict.threshold == threshold


def test_batch_end_to_end(
    tmp_path: Path, running_workers: Settings, simulator: ManagedProcess
) -> None:
    settings = running_workers  # two worker processes share the queue
    judges = [
        {"model": "openai/balanced", "n": 3},
        {"model": "openai/strict", "n": 2},
        {"model": "openai/contrarian", "n": 3},
    ]
    batch_id = run_batch(settings, write_batch(tmp_path, simulator, judges))

    sessions = session_factory(settings.database_url)
    verdicts = list(iter_verdicts(sessions, batch_id))
    assert [(v.item_id, v.criterion_id) for v in verdicts] == [
        (item["id"], dim) for item in ITEMS for dim in ("relevance", "tone")
    ]
    for verdict in verdicts:
        assert set(verdict.llm_evaluations) == {
            "openai/balanced",
            "openai/strict",
            "openai/contrarian",
        }
        assert [len(e.samples) for e in verdict.llm_evaluations.values()] == [3, 2, 3]
        check_record_against_samples(
            settings, batch_id, verdict, 3.5 if verdict.criterion_id == "relevance" else 6
        )
        low = verdict.consensus_metrics.consensus_level == Level.LOW
        assert verdict.consensus_metrics.flag_for_review == low
    status = batch_status(sessions, batch_id)
    assert status.n_verdicts == status.n_cells == 10
    assert status.n_samples == status.n_samples_expected == 10 * 8
    assert status.n_failed_samples == 0
    # The simulator's contrarian persona disagrees on about a third of cells: some flags show.
    assert any(v.consensus_metrics.flag_for_review for v in verdicts)
    # Redis keeps nothing per task once a batch is done (no results, no chord counters), nor
    # any key of the batch: its submission's cursor and lock, its mark, its budget meter. The
    # worker that stores the last verdict deletes them right after its commit.
    client = redis.Redis.from_url(settings.broker_url)

    def leftovers() -> list[bytes]:
        patterns = ("celery-task-meta-*", "chord-unlock-*", "*.counter", f"*{batch_id}*")
        return [key for p in patterns for key in client.scan_iter(match=p, count=1000)]

    wait_for(lambda: not leftovers(), 10, f"the keys of batch {batch_id} to go")
    assert leftovers() == []
    # What stays is the deployment's own: its workers' heartbeats and ledgers, kombu's
    # bindings, the rate-limit state (which lapses unused). Other batches of this
    # deployment (other test files share its workers) may still be running: their keys are
    # theirs.


def test_judge_that_always_fails_leaves_others_intact(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    settings = sqlite_workers
    judges = [
        {"model": "openai/balanced", "n": 2},
        {"model": "openai/lenient", "n": 2},
        {"model": "openai/balanced@broken", "n": 2},
    ]
    batch_id = run_batch(
        settings, write_batch(tmp_path, simulator, judges), ends=BatchState.DEGRADED
    )

    sessions = session_factory(settings.database_url)
    verdicts = list(iter_verdicts(sessions, batch_id))
    assert len(verdicts) == 10
    for verdict in verdicts:
        broken = verdict.llm_evaluations["openai/balanced@broken"]
        assert broken.samples == [] and broken.aggregated_score is None and broken.n_failed == 2
        healthy = [verdict.llm_evaluations[j] for j in ("openai/balanced", "openai/lenient")]
        assert all(len(e.samples) == 2 for e in healthy)
        assert verdict.consensus_metrics.flag_for_review
        assert any("balanced@broken" in reason for reason in verdict.flag_reasons)
        # The final score comes from the healthy judges alone.
        expected = statistics.fmean(e.aggregated_score or 0 for e in healthy)
        assert verdict.consensus_metrics.final_score == pytest.approx(expected)
        raw = list_samples(sessions, CellRef(batch_id, verdict.item_id, verdict.criterion_id))
        failed = [s for s in raw if s.judge == "openai/balanced@broken"]
        assert len(failed) == 2
        assert all(s.error_kind == "server_error" and s.attempts == 4 for s in failed)
    assert batch_status(sessions, batch_id).n_failed_samples == 20


def test_every_judge_failing_still_gives_every_record(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    settings = sqlite_workers
    judges = [
        {"model": "openai/balanced@broken", "n": 1},
        {"model": "openai/nosuchpersona", "n": 1},
    ]
    batch_id = run_batch(settings, write_batch(tmp_path, simulator, judges), ends=BatchState.FAILED)
    sessions = session_factory(settings.database_url)
    for verdict in iter_verdicts(sessions, batch_id):
        metrics = verdict.consensus_metrics
        assert metrics.final_score is None and metrics.flag_for_review
        assert verdict.passed is None and verdict.error
        kinds = {
            s.error_kind
            for s in list_samples(
                sessions, CellRef(batch_id, verdict.item_id, verdict.criterion_id)
            )
        }
        assert kinds == {"server_error", "not_found"}
