"""Pairwise and combined modes end to end, with real parts: Redis, two `python -m worker`
processes on SQLite, the simulator over HTTP. Records are recomputed from the stored raw
samples (and, for pairwise, the four scores of each sample); duplicate deliveries must not
count anything twice."""

from __future__ import annotations

import json
import os
import signal
import statistics
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from bench.common import simulator_stats
from jury.batchfile.loading import load_batch
from jury.cli.main import jury
from jury.local.services import ManagedProcess, start_simulator, wait_for
from jury.producer.publishing import Publisher, create_producer_app, short_task_id
from jury.producer.submission import submit_batch
from jury.schemas.batch import BatchConfig, Item
from jury.schemas.pairwise import winner_of
from jury.schemas.tasks import CellRef, SampleRef
from jury.settings import Settings
from jury.simulator.personas import latent_quality
from jury.store.cells import iter_verdicts
from jury.store.engine import session_factory
from jury.store.models import PairJudgmentRow
from jury.store.repository import add_items, batch_status, create_batch, start_batch
from jury.store.samples import list_samples, pair_judgments
from tests.conftest import SIMULATOR_SEED, WorkerStarter, settings_for
from tests.integration.test_faults import assert_exactly_once
from tests.integration.test_pipeline import check_record_against_samples, run_batch

pytestmark = pytest.mark.integration

TONE = {"name": "tone", "description": "Is it kind?", "scale": {"min": 1, "max": 10}}
PAIRS = [
    {
        "id": f"p{i}",
        "input": f"How do I fix problem {i}?",
        "output_a": f"Answer A{i}: restart it, then check cable {i}.",
        "output_b": f"Answer B{i}: it depends." + " Really." * i,
    }
    for i in range(5)
]
SINGLES = [
    {"id": f"s{i}", "input": f"Question {i}?", "output": f"Reply {i}. " * (i + 1)} for i in range(4)
]


def tagged(persona: str, tag: str) -> str:
    return f"openai/{persona}@{tag}"


def answered(simulator: ManagedProcess, model: str) -> int:
    counts = simulator_stats(simulator)["models"].get(model.removeprefix("openai/"), {})
    return int(counts.get("200", 0))


def write_batch(folder: Path, simulator: ManagedProcess, spec: dict[str, Any]) -> Path:
    for judge in spec["judges"]:
        judge["api_base"] = simulator.url
    path = folder / "batch.yaml"
    path.write_text(yaml.safe_dump({"name": "modes-test", **spec}))
    return path


def test_pairwise_batch_judges_both_orders_and_cancels_position_bias(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    tag = short_task_id().lower().replace("_", "").replace("-", "")
    balanced, positional = tagged("balanced", tag), tagged("positional", tag)
    spec = {
        "judges": [
            {"model": balanced, "n": 2, "temperature": 0},
            {"model": positional, "n": 2, "temperature": 0},
        ],
        "dimensions": ["relevance", TONE],
        "pairwise": {"tie_tolerance": 0.5},
        "items": PAIRS,
    }
    batch_id = run_batch(sqlite_workers, write_batch(tmp_path, simulator, spec))
    sessions = session_factory(sqlite_workers.database_url)
    verdicts = list(iter_verdicts(sessions, batch_id))
    assert len(verdicts) == len(PAIRS) * 2
    # Two calls per sample: A first, then B first.
    assert answered(simulator, balanced) == answered(simulator, positional) == len(PAIRS) * 2 * 4

    gaps_checked = 0
    advantages: dict[str, list[float]] = {balanced: [], positional: []}
    for verdict in verdicts:
        outcome = verdict.pairwise
        assert outcome is not None and verdict.passed is None
        cell = CellRef(batch_id, verdict.item_id, verdict.criterion_id)
        samples = list_samples(sessions, cell)
        details = pair_judgments(sessions, cell)
        assert len(samples) == len(details) == 4  # one row of four scores per sample
        for sample in samples:
            assert sample.score == pytest.approx(details[(sample.judge, sample.sample)].preference)
        # The winner comes from the scores: the panel's mean preference and the tolerance.
        means = [statistics.fmean(e.samples) for e in verdict.llm_evaluations.values()]
        final = verdict.consensus_metrics.final_score
        assert final is not None
        assert final == pytest.approx(statistics.fmean(means)) == outcome.preference
        assert outcome.winner == winner_of(final, 0.5)
        agreeing = sum(winner_of(d.preference, 0.5) == outcome.winner for d in details.values())
        assert outcome.n_agreeing == agreeing and outcome.agreement_pct == 100 * agreeing / 4
        # At temperature 0 the simulated judges are deterministic: the balanced judge has no
        # position bias at all, the positional one gains a quarter of the range when shown
        # first (clipped at the scale's top).
        for (judge, _), detail in details.items():
            advantage = detail.first_position_advantage
            assert advantage is not None
            advantages[judge].append(advantage)
        span = 4 if verdict.criterion_id == "relevance" else 9
        a_text = next(p["output_a"] for p in PAIRS if p["id"] == verdict.item_id)
        b_text = next(p["output_b"] for p in PAIRS if p["id"] == verdict.item_id)
        truth = span * (
            latent_quality(SIMULATOR_SEED, verdict.criterion_id, a_text)
            - latent_quality(SIMULATOR_SEED, verdict.criterion_id, b_text)
        )
        if abs(truth) >= 1.5:  # a clear difference: the panel must name the better output
            gaps_checked += 1
            assert outcome.winner == ("A" if truth > 0 else "B"), (verdict, truth)
    assert gaps_checked >= 2
    assert set(advantages[balanced]) == {0.0}
    assert statistics.fmean(advantages[positional]) > 0.5

    runner = CliRunner()
    env = sqlite_workers.to_env()
    shown = runner.invoke(jury, ["results", batch_id, "--format", "json"], env=env)
    assert shown.exit_code == 0, shown.output
    document = json.loads(shown.output)
    totals = document["summary"]["pairwise"]["overall"]
    winners = [v.pairwise.winner for v in verdicts if v.pairwise]
    assert (totals["wins_a"], totals["wins_b"], totals["ties"]) == (
        winners.count("A"),
        winners.count("B"),
        winners.count("tie"),
    )
    assert totals["first_position_bias"] > 0.3
    assert document["results"][0]["pairwise"]["winner"] in ("A", "B", "tie")
    table = runner.invoke(jury, ["results", batch_id], env=env)
    assert "pairwise: output A against output B" in table.output
    assert "A wins" in table.output or "B wins" in table.output
    page = runner.invoke(jury, ["report", batch_id, "-o", "-"], env=env)
    assert page.exit_code == 0, page.output
    assert "Pairwise comparison: who wins, per dimension" in page.output
    assert f"<b>{totals['wins_a']}</b>A wins" in page.output


def test_combined_batch_scores_every_dimension_in_one_call(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    tag = short_task_id().lower().replace("_", "").replace("-", "")
    balanced, strict = tagged("balanced", tag), tagged("strict", tag)
    spec = {
        # The strict judge is asked for its reasoning first: its answers score all the same.
        "judges": [{"model": balanced, "n": 2}, {"model": strict, "n": 1, "reasoning_first": True}],
        "dimensions": ["relevance", TONE],
        "aggregation": {"consensus_threshold": 1.0},
        "mode": "combined",
        "items": SINGLES,
    }
    batch_id = run_batch(sqlite_workers, write_batch(tmp_path, simulator, spec))
    sessions = session_factory(sqlite_workers.database_url)
    # One call per (item, judge, sample), not per dimension.
    assert answered(simulator, balanced) == len(SINGLES) * 2
    assert answered(simulator, strict) == len(SINGLES)
    verdicts = list(iter_verdicts(sessions, batch_id))
    assert [(v.item_id, v.criterion_id) for v in verdicts] == [
        (item["id"], dim) for item in SINGLES for dim in ("relevance", "tone")
    ]
    for verdict in verdicts:
        assert verdict.pairwise is None and verdict.passed is not None
        threshold = 3.5 if verdict.criterion_id == "relevance" else 5.5
        check_record_against_samples(sqlite_workers, batch_id, verdict, threshold)
    # Each call's tokens are split over its two samples: together they make the call's whole.
    for item in SINGLES:
        cells = [CellRef(batch_id, item["id"], d) for d in ("relevance", "tone")]
        relevance, tone = (
            {(s.judge, s.sample): s for s in list_samples(sessions, c)} for c in cells
        )
        for key, sample in relevance.items():
            assert abs(sample.prompt_tokens - tone[key].prompt_tokens) <= 1
            assert sample.latency_ms == tone[key].latency_ms
    status = batch_status(sessions, batch_id)
    assert status.n_samples == len(SINGLES) * 2 * 3 and status.n_failed_samples == 0


def _direct_batch(settings: Settings, config: BatchConfig, item: Item) -> tuple[str, Publisher]:
    batch_id = f"modes-{short_task_id()}"
    sessions = session_factory(settings.database_url)
    create_batch(sessions, batch_id, config, "test")
    add_items(sessions, batch_id, [(0, item)])
    start_batch(sessions, batch_id, n_items=1, n_dimensions=len(config.dimensions))
    return batch_id, Publisher(create_producer_app(settings), config)


@pytest.mark.parametrize("pairwise", [False, True], ids=["combined", "combined-pairwise"])
def test_combined_task_delivered_twice_counts_once(
    sqlite_workers: Settings, simulator: ManagedProcess, pairwise: bool
) -> None:
    """Sample 0's combined task twice and sample 1's not yet: no verdict, each cell holds one
    sample 0. Once sample 1 arrives, both cells get their verdict, each sample counted once."""
    tag = short_task_id().lower().replace("_", "").replace("-", "")
    model = tagged("balanced", tag)
    config = BatchConfig.model_validate(
        {
            "judges": [{"model": model, "n": 2, "api_base": simulator.url}],
            "dimensions": ["relevance", TONE],
            "mode": "combined",
            **({"pairwise": {}} if pairwise else {}),
        }
    )
    item = (
        Item(id="a", output_a="Restart the router.", output_b="No idea.")
        if pairwise
        else Item(id="a", output="Restart the router.")
    )
    batch_id, publisher = _direct_batch(sqlite_workers, config, item)
    sessions = session_factory(sqlite_workers.database_url)
    task = SampleRef(batch_id, "a", "relevance", model, 0)  # named by its first dimension
    publisher.publish([task, task])
    calls_per_task = 2 if pairwise else 1
    wait_for(lambda: answered(simulator, model) == 2 * calls_per_task, 30, "both deliveries")
    cells = [CellRef(batch_id, "a", d) for d in ("relevance", "tone")]
    wait_for(lambda: all(len(list_samples(sessions, c)) == 1 for c in cells), 30, "sample 0")
    assert batch_status(sessions, batch_id).n_verdicts == 0
    publisher.publish([task._replace(sample=1)])
    wait_for(lambda: batch_status(sessions, batch_id).status.finished, 30, "the verdicts")
    publisher.close()

    status = batch_status(sessions, batch_id)
    assert (status.n_verdicts, status.n_samples) == (2, 4)
    for verdict in iter_verdicts(sessions, batch_id):
        cell = CellRef(batch_id, "a", verdict.criterion_id)
        stored = list_samples(sessions, cell)
        assert [s.sample for s in stored] == [0, 1]
        assert verdict.llm_evaluations[model].samples == [s.score for s in stored]
        if pairwise:
            assert verdict.pairwise is not None and verdict.pairwise.n_judgments == 2
            assert len(pair_judgments(sessions, cell)) == 2


def test_killed_worker_loses_nothing_in_a_combined_pairwise_batch(
    tmp_path: Path, redis_url: str, start_workers: WorkerStarter
) -> None:
    """kill -9 a worker mid-batch: its combined pairwise tasks (two calls each, every
    dimension's sample and four scores stored in one transaction) come back and are stored
    once, with their pair scores."""
    slow = start_simulator(tmp_path, ["--latency-ms", "300", "--latency-sigma", "0.1"])
    try:
        settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}").model_copy(
            update={"visibility_timeout_s": 6, "worker_concurrency": 4}
        )
        victim, _ = start_workers(settings, count=2)
        spec = {
            "judges": [{"model": "openai/balanced", "n": 2}, {"model": "openai/strict", "n": 2}],
            "dimensions": ["relevance", TONE],
            "mode": "combined",
            "pairwise": {},
            "items": PAIRS,
            "cache": False,
        }
        sessions = session_factory(settings.database_url)
        source = load_batch(write_batch(tmp_path, slow, spec))
        batch_id = submit_batch(source, sessions, create_producer_app(settings))
        wait_for(lambda: batch_status(sessions, batch_id).n_verdicts >= 2, 60, "first verdicts")
        assert batch_status(sessions, batch_id).n_verdicts < len(PAIRS) * 2  # mid-batch
        os.kill(victim.process.pid, signal.SIGKILL)
        wait_for(lambda: batch_status(sessions, batch_id).status.finished, 120, "the batch")
        assert_exactly_once(settings, batch_id)
        calls = sum(int(m.get("200", 0)) for m in simulator_stats(slow)["models"].values())
        print(f"\n{calls} calls for {len(PAIRS) * 2 * 2 * 2} planned (redone after the kill)")
        status = batch_status(sessions, batch_id)
        with sessions() as session:
            rows = session.query(PairJudgmentRow).filter_by(batch_id=batch_id).count()
        assert rows == status.n_samples - status.n_failed_samples  # one per scored sample
        assert all(v.pairwise is not None for v in iter_verdicts(sessions, batch_id))
    finally:
        slow.stop()


def test_resume_queues_combined_tasks(sqlite_workers: Settings, simulator: ManagedProcess) -> None:
    """A combined batch whose tasks never ran: `jury resume` queues one task per (item, judge,
    sample), not one per dimension, and the batch completes."""
    tag = short_task_id().lower().replace("_", "").replace("-", "")
    model = tagged("balanced", tag)
    config = BatchConfig.model_validate(
        {
            "judges": [{"model": model, "n": 2, "api_base": simulator.url}],
            "dimensions": ["relevance", "accuracy", TONE],
            "mode": "combined",
        }
    )
    batch_id, publisher = _direct_batch(sqlite_workers, config, Item(id="a", output="Reply."))
    publisher.close()
    runner = CliRunner()
    resumed = runner.invoke(jury, ["resume", batch_id, "--wait"], env=sqlite_workers.to_env())
    assert resumed.exit_code == 0, resumed.output
    sessions = session_factory(sqlite_workers.database_url)
    status = batch_status(sessions, batch_id)
    assert (status.n_verdicts, status.n_samples) == (3, 6)
    assert answered(simulator, model) == 2  # two combined calls for six samples
