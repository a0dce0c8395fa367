"""The multi-LLM judge plan's worked example through jury, end to end: its judge_config.json
named by the batch, its test cases (test_id, llm_criteria: focus_areas, prompt_hint,
custom_criteria) as the items file, two judges (the plan's openai and gemini keys) with N=3,
scripted in the simulator to give the plan's samples: [6.0, 7.0, 6.5] and [5.0, 6.0, 5.5].

The plan's record (Phase 6.4) states aggregated scores 6.5 and 5.5, final_score 6.0,
cross_model_std 0.71, consensus PARTIAL, confidence MEDIUM, no flag, passed at threshold 6.0.
Its within_model_std 0.41 is numpy's population std (ddof=0), while its cross_model_std 0.71
is the sample std (ddof=1) of [6.5, 5.5]; jury reports the sample std for both (0.5 within:
docs/coming-from.md says so). Each test case is judged only on what it names: verdicts, cell
counts, progress, the dry-run plan and every output format follow each item's criteria.
Real Redis, real worker processes, the simulator over HTTP."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from jury.cli.main import jury
from jury.local.services import ManagedProcess, start_simulator
from jury.producer.publishing import short_task_id
from jury.settings import Settings
from jury.store.engine import session_factory
from jury.store.repository import batch_status
from tests.integration.test_modes import answered
from tests.integration.test_pipeline import run_batch

pytestmark = pytest.mark.integration

PLAN_SAMPLES = {"openai_gpt-4o-mini": [6.0, 7.0, 6.5], "google_gemini-2.0-flash": [5.0, 6.0, 5.5]}
TAG = short_task_id().lower().replace("_", "").replace("-", "")
MODELS = {"openai_gpt-4o-mini": f"balanced@gpt{TAG}", "google_gemini-2.0-flash": f"strict@gem{TAG}"}

# The plan's test cases: one with llm_criteria choosing its criteria (one of them its own),
# one without focus_areas (judged on the batch's default dimensions).
TEST_CASES: list[dict[str, Any]] = [
    {
        "test_id": "05_category_personalization",
        "name": "Category personalization",
        "description": "Recommendations follow the user's primary category",
        "evaluation_method": "deterministic_llm",
        "profile": {"primary_category": "science", "content_hypothesis": "deep dives"},
        "response": {"episodes": [{"title": "Black holes, explained", "credibility": 4}]},
        "llm_criteria": {
            "enabled": True,
            "focus_areas": ["hypothesis_alignment", "custom_criterion"],
            "prompt_hint": "Evaluate if (1) recommendations match the user's primary category",
            "custom_criteria": {
                "custom_criterion": {
                    "name": "CUSTOM (1-10)",
                    "description": "Evaluate custom aspect",
                }
            },
        },
        "pass_criteria": [{"type": "min_count", "value": 1}],
        "setup": {"profile": "03_science_fan"},
    },
    {
        "test_id": "01_cold_start",
        "name": "Cold start",
        "description": "A new user gets broad recommendations",
        "evaluation_method": "llm_only",
        "profile": {"primary_category": None},
        "response": {"episodes": [{"title": "Today in history"}]},
        "llm_criteria": {"enabled": True, "prompt_hint": "Breadth matters more than depth."},
    },
]


@pytest.fixture(scope="module")
def scripted_simulator(logs_dir: Path) -> Iterator[ManagedProcess]:
    scripts = [
        f"{MODELS[judge]}={','.join(f'{s:g}' for s in samples)}"
        for judge, samples in PLAN_SAMPLES.items()
    ]
    simulator = start_simulator(logs_dir, [arg for s in scripts for arg in ("--script", s)])
    yield simulator
    simulator.stop()


def write_plan_batch(
    folder: Path, simulator: ManagedProcess, extra: dict[str, Any], uncertainty: bool = True
) -> Path:
    judge_config = {
        "judges": [
            {
                "provider": provider,
                "model": f"openai/{MODELS[name]}",
                "name": name,
                "enabled": True,
                "n": 3,
                "api_base": simulator.url,
            }
            for provider, name in (
                ("openai", "openai_gpt-4o-mini"),
                ("gemini", "google_gemini-2.0-flash"),
            )
        ],
        "temperature": 0.8,
        "aggregation": {"within_model": "mean", "across_models": "mean"},
        "report_uncertainty": uncertainty,
        "flag_low_consensus": True,
        "consensus_threshold": 1.5,
    }
    (folder / "judge_config.json").write_text(json.dumps(judge_config))
    (folder / "test_cases.json").write_text(json.dumps(TEST_CASES))
    batch = {
        "name": "plan-phase-6",
        "judges": "judge_config.json",
        "dimensions": [
            {"name": "relevance", "scale": {"min": 1, "max": 10}, "threshold": 6.0},
            # The plan's criterion, judged only where a test case names it.
            {
                "name": "hypothesis_alignment",
                "scale": {"min": 1, "max": 10},
                "threshold": 6.0,
                "item_only": True,
            },
        ],
        "items": "test_cases.json",
        **extra,
    }
    path = folder / "batch.yaml"
    path.write_text(yaml.safe_dump(batch))
    return path


def test_the_plans_worked_example_record(
    tmp_path: Path, sqlite_workers: Settings, scripted_simulator: ManagedProcess
) -> None:
    path = write_plan_batch(tmp_path, scripted_simulator, {})
    env = sqlite_workers.to_env()
    runner = CliRunner()
    plan = json.loads(runner.invoke(jury, ["submit", str(path), "--dry-run", "--json"]).output)
    # 05 on hypothesis_alignment and its own criterion, 01 on the batch's relevance.
    assert (plan["n_items"], plan["n_cells"], plan["calls"]) == (2, 3, 3 * 2 * 3)

    batch_id = run_batch(sqlite_workers, path)
    status = batch_status(session_factory(sqlite_workers.database_url), batch_id)
    assert (status.n_cells, status.n_verdicts, status.n_samples_expected) == (3, 3, 18)
    for model in MODELS.values():  # one call per (cell, sample): no call for other criteria
        assert answered(scripted_simulator, f"openai/{model}") == 3 * 3

    document = json.loads(
        runner.invoke(jury, ["results", batch_id, "--format", "json"], env=env).output
    )
    records = {(r["item_id"], r["criterion_id"]): r for r in document["results"]}
    assert sorted(records) == [
        ("01_cold_start", "relevance"),
        ("05_category_personalization", "custom_criterion"),
        ("05_category_personalization", "hypothesis_alignment"),
    ]
    record = records[("05_category_personalization", "hypothesis_alignment")]
    for judge, samples in PLAN_SAMPLES.items():
        evaluation = record["llm_evaluations"][judge]
        assert sorted(evaluation["samples"]) == sorted(samples)  # arrival order is free
        assert evaluation["aggregated_score"] == pytest.approx(sum(samples) / 3)
        assert evaluation["within_model_std"] == pytest.approx(0.5)  # the plan's 0.41, ddof=1
    assert record["llm_evaluations"]["openai_gpt-4o-mini"]["aggregated_score"] == 6.5
    assert record["llm_evaluations"]["google_gemini-2.0-flash"]["aggregated_score"] == 5.5
    metrics = record["consensus_metrics"]
    assert metrics["final_score"] == pytest.approx(6.0)
    assert round(metrics["cross_model_std"], 2) == 0.71
    assert (metrics["consensus_level"], metrics["confidence"]) == ("PARTIAL", "MEDIUM")
    assert metrics["flag_for_review"] is False
    assert (record["passed"], record["threshold"]) == (True, 6.0)
    # The test case's own criterion is on the batch's scale (1-10), its midpoint the threshold.
    assert records[("05_category_personalization", "custom_criterion")]["threshold"] == 5.5
    assert records[("01_cold_start", "relevance")]["threshold"] == 6.0

    rows = list(
        csv.DictReader(
            io.StringIO(
                runner.invoke(jury, ["results", batch_id, "--format", "csv"], env=env).output
            )
        )
    )
    assert sorted((r["item_id"], r["criterion_id"]) for r in rows) == sorted(records)
    report = tmp_path / "report.html"
    made = runner.invoke(jury, ["report", batch_id, "-o", str(report)], env=env)
    assert made.exit_code == 0, made.output
    page = report.read_text()
    assert "custom_criterion" in page and "3 / 3" in page
    shown = runner.invoke(jury, ["status", batch_id], env=env)
    assert shown.exit_code == 0 and "3/3" in shown.output.replace(",", "")


def test_report_uncertainty_false_leaves_the_uncertainty_out_of_every_output(
    tmp_path: Path, sqlite_workers: Settings, scripted_simulator: ManagedProcess
) -> None:
    path = write_plan_batch(
        tmp_path, scripted_simulator, {"mode": "combined", "cache": False}, uncertainty=False
    )
    before = {m: answered(scripted_simulator, f"openai/{m}") for m in MODELS.values()}
    batch_id = run_batch(sqlite_workers, path)
    for model in MODELS.values():  # 2 test cases × 3 samples, whatever each one's criteria
        assert answered(scripted_simulator, f"openai/{model}") - before[model] == 2 * 3
    env = sqlite_workers.to_env()
    runner = CliRunner()
    output = runner.invoke(jury, ["results", batch_id, "--format", "jsonl"], env=env).output
    records = [json.loads(line) for line in output.splitlines()]
    # Combined mode: one call per (item, judge, sample) scores the item's own dimensions.
    assert sorted((r["item_id"], r["criterion_id"]) for r in records) == [
        ("01_cold_start", "relevance"),
        ("05_category_personalization", "custom_criterion"),
        ("05_category_personalization", "hypothesis_alignment"),
    ]
    for record in records:
        assert set(record["consensus_metrics"]) == {"final_score", "flag_for_review"}
        for evaluation in record["llm_evaluations"].values():
            assert "within_model_std" not in evaluation and len(evaluation["samples"]) == 3
        assert record["consensus_metrics"]["final_score"] is not None
    header = runner.invoke(jury, ["results", batch_id, "--format", "csv"], env=env).output
    columns = header.splitlines()[0].split(",")
    assert "final_score" in columns and "openai_gpt-4o-mini:score" in columns
    assert not {"cross_model_std", "consensus_level", "confidence"} & set(columns)
    assert not [c for c in columns if c.endswith(":std")]
    table = runner.invoke(jury, ["results", batch_id], env=env, terminal_width=200).output
    assert "final" in table and "confidence" not in table and "±" not in table


def test_adaptive_sampling_escalates_each_test_cases_own_cells(
    tmp_path: Path, sqlite_workers: Settings, scripted_simulator: ManagedProcess
) -> None:
    """A first round of one sample per judge (6 against 5: std 0.71, over max_std 0.5), then
    the rest of each cell's samples, on each test case's own criteria only."""
    adaptive = {"adaptive": {"initial_samples": 1, "max_std": 0.5}, "cache": False}
    path = write_plan_batch(tmp_path, scripted_simulator, adaptive)
    before = {m: answered(scripted_simulator, f"openai/{m}") for m in MODELS.values()}
    batch_id = run_batch(sqlite_workers, path)
    for model in MODELS.values():
        assert answered(scripted_simulator, f"openai/{model}") - before[model] == 3 * 3
    output = CliRunner().invoke(
        jury, ["results", batch_id, "--format", "jsonl"], env=sqlite_workers.to_env()
    )
    records = [json.loads(line) for line in output.output.splitlines()]
    assert len(records) == 3
    for record in records:  # every cell escalated: the plan's record, whatever its criterion
        for judge, samples in PLAN_SAMPLES.items():
            assert sorted(record["llm_evaluations"][judge]["samples"]) == sorted(samples)
        assert record["consensus_metrics"]["final_score"] == pytest.approx(6.0)
