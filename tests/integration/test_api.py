"""The Python API end to end: a batch given as a dict and items, submitted to real workers,
followed, read as typed records and as a pandas DataFrame; and `evaluate` on the embedded
default (its own worker and simulator, a temporary database)."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas
import pytest

import jury
from jury.local.services import ManagedProcess
from jury.settings import Settings

pytestmark = pytest.mark.integration

ITEMS = [{"id": f"q{i}", "input": f"Question {i}?", "output": f"Answer {i}."} for i in range(3)]


def spec(api_base: str) -> dict[str, object]:
    return {
        "name": "api-test",
        "judges": [
            {"model": "openai/balanced", "n": 2, "api_base": api_base},
            {"model": "openai/strict", "n": 1, "api_base": api_base},
        ],
        "dimensions": ["relevance", "accuracy"],
    }


def test_submit_wait_and_read_as_records_and_dataframe(
    sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    batch = jury.submit(spec(simulator.url), items=ITEMS, settings=sqlite_workers)
    status = batch.wait(timeout=120, progress=False)
    assert status.status.value == "completed" and status.batch_id == batch.id
    results = batch.results()
    assert all(isinstance(r, jury.Verdict) for r in results.records)
    assert [(r.item_id, r.criterion_id) for r in results.records] == [
        (item["id"], d) for item in ITEMS for d in ("relevance", "accuracy")
    ]
    assert len(results.samples) == 3 * 2 * 3 and results.failures == []

    frame = results.to_pandas()
    assert isinstance(frame, pandas.DataFrame) and len(frame) == 6
    assert list(frame.columns[:3]) == ["item_id", "criterion_id", "final_score"]
    assert frame["final_score"].tolist() == [
        r.consensus_metrics.final_score for r in results.records
    ]
    assert "openai/strict:score" in frame.columns
    samples = results.to_pandas(samples=True)
    assert len(samples) == 18 and set(samples["judge"]) == {"openai/balanced", "openai/strict"}
    assert samples["reasoning"].notna().all()


def test_bad_input_is_a_jury_error_and_nothing_is_enqueued(sqlite_workers: Settings) -> None:
    with pytest.raises(jury.JuryError, match=r"items\[0\]|item.output: Field required"):
        jury.submit(spec("http://127.0.0.1:1/v1"), items=[{"id": "x"}], settings=sqlite_workers)


def test_without_pandas_the_error_names_the_extra(
    sqlite_workers: Settings, simulator: ManagedProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = jury.submit(spec(simulator.url), items=ITEMS[:1], settings=sqlite_workers)
    batch.wait(timeout=120, progress=False)
    results = batch.results()
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if it were not installed
    with pytest.raises(jury.JuryError, match=r"pip install 'jury-panel\[pandas\]'"):
        results.to_pandas()
    assert len(results.rows()) == 2 and results.rows(samples=True)[0]["judge"]


def test_evaluate_runs_on_the_embedded_default(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("JURY_BROKER_URL", redis_url)  # a Redis db of the tests' own
    monkeypatch.chdir(tmp_path)
    results = jury.evaluate(
        spec("${JURY_SIMULATOR_URL}"),
        items=ITEMS,
        simulator=True,
        embedded=True,
        timeout=120,
        progress=False,
    )
    assert results.status.status.value == "completed"
    frame = results.to_pandas()
    assert len(frame) == 6 and frame["final_score"].notna().all()
    assert not list(tmp_path.iterdir())  # nothing left behind here
