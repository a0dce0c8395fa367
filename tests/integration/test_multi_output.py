"""ragdiff's multi-run compare through jury: each query answered by three runs (`outputs:
{run: text}`), every pair of runs compared by the pipeline (real Redis, the shared workers,
the simulator over HTTP), then ranked per query and over the batch. The figures: every
query's every pair judged exactly once, in both orders (or one, `orders: single`), and the
wins, losses, ties and mean preferences of each run equal to what its records say."""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path
from statistics import fmean
from typing import Any, TypedDict

import pytest
from click.testing import CliRunner

from jury.cli.main import jury
from jury.local.services import ManagedProcess
from jury.producer.publishing import short_task_id
from jury.settings import Settings
from jury.simulator.personas import latent_quality
from tests.conftest import SIMULATOR_SEED
from tests.integration.test_modes import answered, tagged, write_batch
from tests.integration.test_pipeline import run_batch

pytestmark = pytest.mark.integration

RUNS = ("abc123", "def456", "ghi789")  # ragdiff's run ids: the outputs' names


class Query(TypedDict):
    """An item of the batch: a query and each run's output for it."""

    id: str
    input: str
    outputs: dict[str, str]


QUERIES: list[Query] = [
    {
        "id": f"tafsir-{q}",
        "input": f"What does verse {q} say about patience?",
        "outputs": {
            "abc123": f"Verse {q} speaks of patience in hardship, with its context.",
            "def456": f"Patience. Verse {q}." + " See commentary." * q,
            "ghi789": f"It is about verse {q}; patience is praised, as the scholars explain {q}.",
        },
    }
    for q in range(4)
]


def standings(records: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Each query's standing of each run, recomputed by hand from its pair records."""
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for record in records:
        outcome = record["pairwise"]
        query = record["item_id"].split(" [")[0]
        for side, sign, other in (("name_a", 1, "B"), ("name_b", -1, "A")):
            row = found.setdefault(query, {}).setdefault(
                outcome[side], {"wins": 0, "losses": 0, "ties": 0, "preferences": []}
            )
            own = "A" if sign == 1 else "B"
            key = {own: "wins", other: "losses", "tie": "ties"}[outcome["winner"]]
            row[key] += 1
            row["preferences"].append(sign * outcome["preference"])
    return found


def run_compare(
    tmp_path: Path, settings: Settings, simulator: ManagedProcess, orders: str
) -> tuple[str, str, list[dict[str, Any]], dict[str, Any]]:
    judge = tagged("balanced", short_task_id().lower().replace("_", "").replace("-", ""))
    spec = {
        "judges": [{"model": judge, "n": 1, "temperature": 0}],
        "dimensions": ["relevance"],
        "pairwise": {"orders": orders, "tie_tolerance": 0.5},
        "items": QUERIES,
    }
    batch_id = run_batch(settings, write_batch(tmp_path, simulator, spec))
    shown = CliRunner().invoke(
        jury, ["results", batch_id, "--format", "json"], env=settings.to_env()
    )
    assert shown.exit_code == 0, shown.output
    document = json.loads(shown.output)
    return batch_id, judge, document["results"], document["summary"]


def test_ragdiff_multi_run_compare(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    batch_id, judge, records, summary = run_compare(tmp_path, sqlite_workers, simulator, "both")
    pairs = list(combinations(RUNS, 2))
    # Every query's every pair of runs judged exactly once, in both orders: two calls each.
    assert sorted(r["item_id"] for r in records) == sorted(
        f"{q['id']} [{a} vs {b}]" for q in QUERIES for a, b in pairs
    )
    assert answered(simulator, judge) == len(QUERIES) * len(pairs) * 2
    checked = 0
    for record in records:
        outcome = record["pairwise"]
        query = next(q for q in QUERIES if record["item_id"].startswith(q["id"] + " ["))
        a, b = record["item_id"].split(" [")[1].rstrip("]").split(" vs ")
        assert (outcome["name_a"], outcome["name_b"]) == (a, b)
        assert outcome["winner_name"] == {"A": a, "B": b, "tie": "tie"}[outcome["winner"]]
        truth = 4 * (
            latent_quality(SIMULATOR_SEED, "relevance", query["outputs"][a])
            - latent_quality(SIMULATOR_SEED, "relevance", query["outputs"][b])
        )
        if abs(truth) >= 1.5:  # a clear difference: the better run wins
            checked += 1
            assert outcome["winner_name"] == (a if truth > 0 else b)
    assert checked >= 1

    # Each query's ranking and the batch totals: the figures its records give.
    expected = standings(records)
    outputs = summary["outputs"]
    assert set(outputs["items"]) == {q["id"] for q in QUERIES}
    for query, rows in outputs["items"].items():
        assert [r["rank"] for r in rows] == sorted(r["rank"] for r in rows)
        for row in rows:
            mine = expected[query][row["output"]]
            assert (row["wins"], row["losses"], row["ties"]) == (
                mine["wins"],
                mine["losses"],
                mine["ties"],
            )
            assert row["wins"] + row["losses"] + row["ties"] == len(RUNS) - 1
            assert row["mean_preference"] == pytest.approx(fmean(mine["preferences"]), abs=1e-4)
    overall = {row["output"]: row for row in outputs["overall"]}
    assert set(overall) == set(RUNS)
    for run, row in overall.items():
        assert row["wins"] == sum(expected[q][run]["wins"] for q in expected)
        assert row["ties"] == sum(expected[q][run]["ties"] for q in expected)
        assert row["wins"] + row["losses"] + row["ties"] == len(QUERIES) * (len(RUNS) - 1)
    assert sum(r["wins"] for r in overall.values()) == sum(r["losses"] for r in overall.values())
    best = outputs["overall"][0]
    assert best["win_rate"] == max(r["win_rate"] for r in overall.values())

    table = CliRunner().invoke(jury, ["results", batch_id], env=sqlite_workers.to_env())
    assert "outputs: each against the others" in table.output
    assert best["output"] in table.output
    page = CliRunner().invoke(jury, ["report", batch_id, "-o", "-"], env=sqlite_workers.to_env())
    assert page.exit_code == 0, page.output
    assert "<h3>Outputs, each against the others</h3>" in page.output
    assert f"<h3>{QUERIES[0]['id']}</h3>" in page.output
    assert f"<td>1</td><th>{best['output']}</th><td>{best['wins']}</td>" in page.output


def test_single_order_halves_the_calls(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    _, judge, records, summary = run_compare(tmp_path, sqlite_workers, simulator, "single")
    assert answered(simulator, judge) == len(QUERIES) * 3  # one call per pair
    assert all(r["pairwise"]["n_both_orders"] == 0 for r in records)
    assert len(summary["outputs"]["overall"]) == len(RUNS)
