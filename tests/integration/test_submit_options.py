"""`jury submit --sample N --seed S`, `--set PATH=VALUE` and the judge shorthands, end to end:
Redis, real worker processes, the simulator. The batch that runs is the file as changed: the
sampled items only, the overridden settings stored in the batch's configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from jury.batchfile.overrides import sample_indices
from jury.cli.main import jury
from jury.local.services import ManagedProcess
from jury.settings import Settings
from jury.store.engine import session_factory
from jury.store.repository import load_config

pytestmark = pytest.mark.integration

ITEMS = [{"id": f"q{i}", "input": f"Question {i}?", "output": f"Answer {i}."} for i in range(10)]


def _batch(folder: Path, simulator: ManagedProcess) -> Path:
    (folder / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    spec = {
        "name": "options",
        "judges": [
            {"model": "openai/balanced", "n": 3, "api_base": simulator.url},
            {"model": "openai/strict", "n": 3, "api_base": simulator.url},
        ],
        "dimensions": ["relevance"],
        "items": "items.jsonl",
    }
    path = folder / "batch.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_dry_run_counts_the_sample_and_the_overrides(
    tmp_path: Path, simulator: ManagedProcess
) -> None:
    batch = str(_batch(tmp_path, simulator))
    runner = CliRunner()
    args = ["submit", batch, "--dry-run", "--json", "--sample", "4", "--seed", "42"]
    plan = json.loads(runner.invoke(jury, [*args, "--set", "judges.0.n=5"]).output)
    assert plan["n_items"] == 4 and plan["calls"] == 4 * (5 + 3)
    bad = runner.invoke(jury, ["submit", batch, "--dry-run", "--set", "judges.2.n=1"])
    assert bad.exit_code == 2 and "judges.2: the list holds 2 entries" in bad.output
    invalid = runner.invoke(jury, ["submit", batch, "--dry-run", "--set", "judges.0.n=0"])
    assert invalid.exit_code == 2 and "judges[0].n" in invalid.output
    alone = runner.invoke(jury, ["submit", batch, "--dry-run", "--seed", "1"])
    assert alone.exit_code == 2 and "--seed goes with --sample" in alone.output


def test_sampled_batch_with_overrides_runs_as_changed(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    batch = str(_batch(tmp_path, simulator))
    options = ["--sample", "4", "--seed", "42", "--set", "judges.1.n=1", "--temperature", "0"]
    runner = CliRunner()
    env = sqlite_workers.to_env()
    done = runner.invoke(
        jury,
        ["submit", batch, "--wait", "-q", "--timeout", "60", "--concurrency", "3", *options],
        env=env,
    )
    assert done.exit_code == 0, done.output
    batch_id = done.output.strip().splitlines()[-1]
    shown = runner.invoke(jury, ["results", batch_id, "--format", "json"], env=env)
    records = json.loads(shown.output)["results"]
    expected = [ITEMS[i]["id"] for i in sample_indices(len(ITEMS), 4, 42)]
    assert sorted(r["item_id"] for r in records) == sorted(expected)
    assert {len(r["llm_evaluations"]["openai/strict"]["samples"]) for r in records} == {1}
    config = load_config(session_factory(sqlite_workers.database_url), batch_id)
    assert [(j.n, j.temperature, j.max_in_flight) for j in config.judges] == [
        (3, 0.0, 3),
        (1, 0.0, 3),
    ]


def test_the_python_api_takes_the_same_options(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    import jury as api

    overrides = ["judges.0.n=1", "judges.1.n=1", "aggregation.also_across_models=[min, max]"]
    batch = api.submit(
        _batch(tmp_path, simulator), settings=sqlite_workers, sample=3, seed=7, overrides=overrides
    )
    batch.wait(timeout=60, progress=False)
    results = batch.results()
    expected = [ITEMS[i]["id"] for i in sample_indices(len(ITEMS), 3, 7)]
    assert [r.item_id for r in results.records] == expected
    row = results.rows()[0]
    scores: list[float] = []
    for evaluation in results.records[0].llm_evaluations.values():
        assert evaluation.aggregated_score is not None  # min and max below need every score
        scores.append(evaluation.aggregated_score)
    assert (row["aggregation:min"], row["aggregation:max"]) == (min(scores), max(scores))
