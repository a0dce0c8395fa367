"""The `jury` command as a user runs it: real subprocesses against real Redis and a worker."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from jury.local.services import ManagedProcess
from jury.settings import Settings
from tests.conftest import queued_messages, settings_for, worker_env
from tests.integration.test_pipeline import write_batch

pytestmark = pytest.mark.integration
JURY = [sys.executable, "-c", "from jury.cli.main import main; main()"]


def jury(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*JURY, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=180
    )


def test_submit_wait_status_results(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    settings = sqlite_workers
    env = worker_env(settings)
    batch = write_batch(
        tmp_path,
        simulator,
        [{"model": "openai/balanced", "n": 2}, {"model": "openai/strict", "n": 1}],
    )

    done = jury(["submit", str(batch), "--wait", "--timeout", "120"], env, tmp_path)
    assert done.returncode == 0, done.stderr
    batch_id = done.stdout.strip().splitlines()[-1]
    assert "⚑" in done.stdout or "verdicts" in done.stdout

    status = jury(["status", batch_id, "--json"], env, tmp_path)
    assert status.returncode == 0, status.stderr
    state = json.loads(status.stdout)
    assert state["status"] == "completed" and state["n_verdicts"] == state["n_cells"] == 10

    as_json = json.loads(jury(["results", batch_id, "--format", "json"], env, tmp_path).stdout)
    assert as_json["batch_id"] == batch_id and as_json["status"] == "completed"
    assert len(as_json["results"]) == 10 and as_json["summary"]["n_records"] == 10
    record = as_json["results"][0]
    assert set(record) >= {
        "item_id",
        "criterion_id",
        "llm_evaluations",
        "consensus_metrics",
        "passed",
        "threshold",
    }
    assert set(record["llm_evaluations"]["openai/balanced"]) >= {
        "samples",
        "aggregated_score",
        "within_model_std",
        "n_failed",
    }
    assert set(record["consensus_metrics"]) == {
        "final_score",
        "cross_model_std",
        "consensus_level",
        "confidence",
        "flag_for_review",
    }

    lines = jury(["results", batch_id, "--format", "jsonl"], env, tmp_path).stdout.splitlines()
    assert [json.loads(line) for line in lines] == as_json["results"]

    out = tmp_path / "results.csv"
    assert (
        jury(
            ["results", batch_id, "--format", "csv", "--output", str(out)], env, tmp_path
        ).returncode
        == 0
    )
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert len(rows) == 10
    assert float(rows[0]["final_score"]) == pytest.approx(
        as_json["results"][0]["consensus_metrics"]["final_score"]
    )
    assert "openai/strict:score" in rows[0]

    table = jury(["results", batch_id], env, tmp_path)
    assert table.returncode == 0 and "item-0" in table.stdout


def test_bad_batch_enqueues_nothing(tmp_path: Path, redis_url: str) -> None:
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    """The real `jury` process: a clean message on stderr (the corpus is in test_bad_input)."""
    content, expected = "judges:\n  - model: x\n    n: 0\n", "judges[0].n"
    batch = tmp_path / "bad.yaml"
    batch.write_text(content)
    result = jury(["submit", str(batch)], worker_env(settings), tmp_path)
    assert result.returncode == 2
    assert expected in result.stderr and "bad.yaml" in result.stderr
    assert "Traceback" not in result.stderr
    assert queued_messages(settings) == []
    assert not (tmp_path / "jury.db").exists()


def test_dry_run_prints_plan_and_enqueues_nothing(
    tmp_path: Path, redis_url: str, simulator: ManagedProcess
) -> None:
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    batch = write_batch(
        tmp_path,
        simulator,
        [{"model": "openai/gpt-4o-mini", "n": 3}, {"model": "openai/balanced", "n": 2}],
    )
    result = jury(["submit", str(batch), "--dry-run", "--json"], worker_env(settings), tmp_path)
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["n_cells"] == 10 and plan["calls"] == 50
    calls = {j["judge"]: j["calls"] for j in plan["judges"]}
    assert calls == {"openai/gpt-4o-mini": 30, "openai/balanced": 20}
    costs = {j["judge"]: j["cost_usd"] for j in plan["judges"]}
    assert costs["openai/gpt-4o-mini"] > 0 and costs["openai/balanced"] is None
    table = jury(["submit", str(batch), "--dry-run"], worker_env(settings), tmp_path)
    assert "gpt-4o-mini" in table.stdout and "nothing enqueued" in table.stdout
    assert queued_messages(settings) == []
    assert not (tmp_path / "jury.db").exists()


def test_unreachable_redis_is_a_clear_error(tmp_path: Path, simulator: ManagedProcess) -> None:
    settings = settings_for("redis://127.0.0.1:1/0", f"sqlite:///{tmp_path / 'jury.db'}")
    batch = write_batch(tmp_path, simulator, [{"model": "openai/balanced", "n": 1}])
    result = jury(["submit", str(batch)], worker_env(settings), tmp_path)
    assert result.returncode == 2
    assert "cannot reach Redis" in result.stderr and "Traceback" not in result.stderr


def test_unknown_batch_is_a_clear_error(tmp_path: Path, redis_url: str) -> None:
    env = worker_env(settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}"))
    for command in (["status", "nope"], ["results", "nope", "--format", "json"]):
        result = jury(command, env, tmp_path)
        assert result.returncode == 2 and "no batch 'nope'" in result.stderr
