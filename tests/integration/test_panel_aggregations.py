"""uqlm's LLMPanel example through jury: three judges (gpt4, claude, gemini there; three
simulator personas here) score each response, and the panel's avg, max, min and median are
reported side by side, one column each, beside each judge's own score. End to end: Redis,
real worker processes, the simulator; every output format (json, jsonl, csv, the report)."""

from __future__ import annotations

import csv
import io
import json
import statistics
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from jury.cli.main import jury
from jury.local.services import ManagedProcess
from jury.settings import Settings
from tests.integration.test_pipeline import run_batch

pytestmark = pytest.mark.integration

PANEL = ["balanced", "strict", "lenient"]  # uqlm: judges=[gpt4, claude, gemini]
RESPONSES = [
    {"id": f"r{i}", "input": f"What is {i} + {i}?", "output": f"It is {2 * i}." + " Sure." * i}
    for i in range(4)
]


def test_panel_reports_avg_max_min_median_side_by_side(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    spec = {
        "name": "uqlm-panel",
        "judges": [
            {"model": f"openai/{p}", "n": 1, "temperature": 0, "api_base": simulator.url}
            for p in PANEL
        ],
        "dimensions": ["accuracy"],
        # uqlm's four columns: avg (jury's mean, the main method), max, min, median.
        "aggregation": {"across_models": "mean", "also_across_models": ["max", "min", "median"]},
        "items": RESPONSES,
    }
    path = tmp_path / "batch.yaml"
    path.write_text(yaml.safe_dump(spec))
    batch_id = run_batch(sqlite_workers, path)
    env = sqlite_workers.to_env()
    runner = CliRunner()

    document = json.loads(
        runner.invoke(jury, ["results", batch_id, "--format", "json"], env=env).output
    )
    records = document["results"]
    assert len(records) == len(RESPONSES)
    spread = 0
    for record in records:
        s = [record["llm_evaluations"][f"openai/{p}"]["aggregated_score"] for p in PANEL]
        panel = record["aggregations"]
        assert list(panel) == ["mean", "max", "min", "median"]
        assert panel["mean"] == pytest.approx(statistics.fmean(s))
        assert panel["max"] == max(s) and panel["min"] == min(s)
        assert panel["median"] == statistics.median(s)
        assert panel["mean"] == record["consensus_metrics"]["final_score"]
        spread += max(s) > min(s)
    assert spread  # the strict and lenient personas disagree somewhere: the columns differ

    lines = runner.invoke(jury, ["results", batch_id, "--format", "jsonl"], env=env).output
    assert [json.loads(line)["aggregations"] for line in lines.splitlines()] == [
        r["aggregations"] for r in records
    ]

    table = runner.invoke(jury, ["results", batch_id, "--format", "csv"], env=env).output
    rows = list(csv.DictReader(io.StringIO(table)))
    for row, record in zip(rows, records, strict=True):
        for method, value in record["aggregations"].items():
            assert float(row[f"aggregation:{method}"]) == pytest.approx(value)
        assert float(row["openai/lenient:score"]) <= float(row["aggregation:max"])

    page = runner.invoke(jury, ["report", batch_id, "-o", "-"], env=env).output
    first = records[0]["aggregations"]
    assert f"max {first['max']:.2f} · min {first['min']:.2f} · median {first['median']:.2f}" in page
