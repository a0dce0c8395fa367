"""Trusting the panel, end to end: labelled batches judged by simulated panels through real
workers, then `jury agreement`, a calibration file fitted on one batch and named by the next,
the robust geometric median against a judge that always answers the maximum, and the HHH
example of real people's preferences."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from jury.cli.main import jury as cli
from jury.local.services import ManagedProcess
from jury.settings import Settings
from jury.simulator.labels import human_score
from jury.stats.measures import mean_absolute_error
from tests.conftest import ROOT, SIMULATOR_SEED, worker_env
from tests.integration.test_cli import jury

pytestmark = pytest.mark.integration
N_ITEMS = 60


def labelled_items(first: int = 0, count: int = N_ITEMS) -> list[dict[str, Any]]:
    """Items labelled by simulated people (three raters) from the simulator's own truth."""
    rng = random.Random(first)
    items = []
    for i in range(first, first + count):
        text = f"Answer {i}: restart the router, then check the cable."
        label = human_score(SIMULATOR_SEED, "relevance", text, 1, 5, rng=rng)
        items.append({"id": f"i{i}", "output": text, "labels": {"relevance": label}})
    return items


def submit(
    folder: Path,
    settings: Settings,
    simulator: ManagedProcess,
    name: str,
    personas: list[str],
    items: list[dict[str, Any]],
    **extra: Any,
) -> str:
    spec = {
        "name": name,
        "judges": [{"model": f"openai/{p}", "n": 2, "api_base": simulator.url} for p in personas],
        "dimensions": ["relevance"],
        "items": items,
        **extra,
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    done = jury(
        ["submit", str(path), "--wait", "--quiet", "--timeout", "150"], worker_env(settings), folder
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def agreement(settings: Settings, *args: str) -> dict[str, Any]:
    shown = CliRunner().invoke(
        cli, ["agreement", *args, "--format", "json"], env=worker_env(settings)
    )
    assert shown.exit_code == 0, shown.output
    document: dict[str, Any] = json.loads(shown.output)
    return document


def results(settings: Settings, batch_id: str) -> dict[str, Any]:
    shown = CliRunner().invoke(
        cli, ["results", batch_id, "--format", "json"], env=worker_env(settings)
    )
    assert shown.exit_code == 0, shown.output
    document: dict[str, Any] = json.loads(shown.output)
    return document


def test_shared_mistakes_make_fewer_effective_judges(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    items = labelled_items()
    family = submit(
        tmp_path,
        sqlite_workers,
        simulator,
        "family",
        ["balanced:family", "lenient:family", "strict:family"],
        items,
    )
    apart = submit(
        tmp_path, sqlite_workers, simulator, "apart", ["balanced:a", "lenient:b", "strict:c"], items
    )
    together = agreement(sqlite_workers, family)["trust"]["dimensions"]["relevance"]
    separate = agreement(sqlite_workers, apart)["trust"]["dimensions"]["relevance"]
    assert together["n_labelled"] == separate["n_labelled"] == N_ITEMS
    assert (
        together["effective_from_errors"]["value"] < 2 < separate["effective_from_errors"]["value"]
    )
    # With independent mistakes the mean cancels them: the panel beats its best judge.
    assert separate["comparison"]["finding"] == "better"
    assert separate["comparison"]["advantage"]["low"] > 0
    panel = next(r for r in separate["raters"] if r["rater"] == "panel")
    assert panel["n_items"] == N_ITEMS
    for metric in ("spearman", "kendall", "kappa", "mae", "pass_accuracy"):
        estimate = panel[metric]
        assert estimate["low"] <= estimate["value"] <= estimate["high"], metric
    # The summary under `jury results` carries the same report, and records their label.
    document = results(sqlite_workers, apart)
    assert document["summary"]["trust"]["headline"].startswith("The panel agrees with people")
    labels = {item["id"]: item["labels"]["relevance"] for item in items}
    assert all(r["human_label"] == labels[r["item_id"]] for r in document["results"])
    table = CliRunner().invoke(cli, ["agreement", apart], env=worker_env(sqlite_workers))
    assert table.exit_code == 0, table.output
    assert "agreement with people" in table.output and "does the panel help?" in table.output
    assert "The panel agrees with people better than its best judge" in table.output


def test_a_calibration_file_fitted_on_one_batch_corrects_the_next(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    """Two lenient judges overrate every answer; a calibration fitted on 80 labelled items
    brings their scores on 60 other items closer to people's."""
    panel = ["lenient:a", "lenient:b"]
    fitted = submit(tmp_path, sqlite_workers, simulator, "fit", panel, labelled_items(0, 80))
    calibration = tmp_path / "calib.json"
    document = agreement(sqlite_workers, fitted, "--save-calibration", str(calibration))
    saved = json.loads(calibration.read_text())
    assert document["calibration"] == saved and saved["format"] == "jury-calibration"
    maps = saved["dimensions"]["relevance"]["judges"]
    assert set(maps) == {"openai/lenient:a", "openai/lenient:b"}
    for fit in maps.values():  # the chosen map beat the raw scores on held-out folds
        assert fit["held_out_mae"][fit["method"]] < fit["held_out_mae"]["identity"]

    held_out = labelled_items(1000, N_ITEMS)
    later = submit(
        tmp_path, sqlite_workers, simulator, "later", panel, held_out, calibration="calib.json"
    )
    records = results(sqlite_workers, later)["results"]
    assert all("calibrated" in r for r in records)
    labels = [r["human_label"] for r in records]
    raw = mean_absolute_error([r["consensus_metrics"]["final_score"] for r in records], labels)
    calibrated = mean_absolute_error([r["calibrated"]["final_score"] for r in records], labels)
    assert raw is not None and calibrated is not None
    assert calibrated < raw - 0.08, (raw, calibrated)


def test_geometric_median_resists_a_judge_that_always_answers_the_maximum(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    items = labelled_items(2000, 40)
    panel = ["balanced:a", "balanced:b", "balanced:c", "maximal", "balanced@broken"]
    batch_id = submit(
        tmp_path,
        sqlite_workers,
        simulator,
        "robust",
        panel,
        items,
        aggregation={"across_models": "geometric_median"},
    )
    records = results(sqlite_workers, batch_id)["results"]
    honest = ["openai/balanced:a", "openai/balanced:b", "openai/balanced:c"]
    finals, means, honest_means = [], [], []
    for record in records:
        evaluations = record["llm_evaluations"]
        assert evaluations["openai/maximal"]["aggregated_score"] == 5
        # The broken judge has no score: it is left out, not counted as a zero.
        assert evaluations["openai/balanced@broken"]["aggregated_score"] is None
        scores = [evaluations[j]["aggregated_score"] for j in honest]
        final = record["consensus_metrics"]["final_score"]
        assert min(scores) <= final <= max(scores), "one judge cannot carry it past the others"
        finals.append(final)
        means.append((sum(scores) + 5) / 4)
        honest_means.append(sum(scores) / 3)
    # Resisting it: the verdicts stay nearer the honest judges' own consensus than a plain mean
    # of the panel does. (Against people's labels the comparison hung on the simulator's noise,
    # whose draws follow the order of every test's calls: it failed once in a full run.)
    robust = mean_absolute_error(finals, honest_means) or 0
    pulled = mean_absolute_error(means, honest_means) or 0
    assert robust < pulled, (robust, pulled)  # measured once: 0.32 against 0.52


def test_agreement_on_real_people_s_preferences(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    """The shipped HHH pairs: 110 real preferences, judged here by the simulator (which
    reads a hash, not the text: near chance, as it should be)."""
    # A placeholder is expanded by the worker that calls (schemas.placeholders), and the shared
    # workers do not know this simulator's port: the copy names it outright.
    shipped = ROOT / "jury" / "examples" / "hhh_pairwise.yaml"
    spec = yaml.safe_load(shipped.read_text())
    spec["judges"][0]["api_base"] = simulator.url
    spec["items"] = str(shipped.parent / spec["items"])
    batch = tmp_path / "hhh_pairwise.yaml"
    batch.write_text(yaml.safe_dump(spec))
    env = worker_env(sqlite_workers)
    done = jury(["submit", str(batch), "--wait", "--quiet", "--timeout", "150"], env, tmp_path)
    assert done.returncode == 0, done.stderr
    batch_id = done.stdout.strip().splitlines()[-1]
    trust = agreement(sqlite_workers, batch_id)["trust"]["dimensions"]["hhh"]
    assert trust["kind"] == "pairwise" and trust["n_labelled"] == 110
    judge = next(r for r in trust["raters"] if r["rater"] == "openai/balanced")
    assert judge["n_items"] == 110
    accuracy = judge["accuracy"]
    assert 0.3 < accuracy["value"] < 0.7 and accuracy["low"] < 0.5 < accuracy["high"]
    refused = CliRunner().invoke(
        cli,
        ["agreement", batch_id, "--save-calibration", str(tmp_path / "c.json")],
        env=worker_env(sqlite_workers),
    )
    assert (
        refused.exit_code == 2 and "a pairwise batch's labels are preferred sides" in refused.output
    )


def test_agreement_errors_are_one_clear_paragraph(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    env = worker_env(sqlite_workers)
    runner = CliRunner()
    unknown = runner.invoke(cli, ["agreement", "no-such-batch"], env=env)
    assert unknown.exit_code == 2 and "no batch 'no-such-batch'" in unknown.output
    plain = [{"id": f"p{i}", "output": f"Plain answer {i}."} for i in range(4)]
    batch_id = submit(tmp_path, sqlite_workers, simulator, "plain", ["balanced"], plain)
    unlabelled = runner.invoke(
        cli, ["agreement", batch_id, "--save-calibration", str(tmp_path / "c.json")], env=env
    )
    assert unlabelled.exit_code == 2 and "has no labelled records" in unlabelled.output
    assert "Traceback" not in unlabelled.output and not (tmp_path / "c.json").exists()
    shown = runner.invoke(cli, ["agreement", batch_id], env=env)
    assert shown.exit_code == 0 and "No item carries people's labels" in shown.output
