"""The Python API end to end: a batch given as a dict and items, submitted to real workers,
followed, read as typed records and as a pandas DataFrame; found again by id, waited for,
cancelled; planned without queueing; and `evaluate` on the embedded default (its own worker
and simulator, a temporary database)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pandas
import pytest

import jury
from jury.api import prepare
from jury.batchfile.loading import BatchSource
from jury.errors import BatchFileError, BatchRunningError, UnknownBatchError, WaitTimeoutError
from jury.local.services import ManagedProcess
from jury.schemas.status import BatchState
from jury.settings import Settings
from jury.store.repository import create_batch
from jury.store.sql import Sessions
from tests.conftest import settings_for

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


def test_a_batch_no_worker_serves_is_attached_waited_for_and_cancelled(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A queue of its own that no worker serves: the batch stays running, so that results()
    neither waits forever nor returns nothing, and cancel() ends it."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where a leaked folder would be
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    with pytest.raises(BatchFileError, match=r"^the batch \(given as a dict\): invalid") as bad:
        jury.submit(spec("${JURY_NOT_SET_ANYWHERE}"), items=ITEMS, settings=settings)
    assert "JURY_NOT_SET_ANYWHERE" in str(bad.value) and "jury-batch-" not in str(bad.value)
    batch = jury.submit(spec("http://127.0.0.1:1/v1"), items=ITEMS, settings=settings)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("jury-")) == []

    same = jury.attach(batch.id, settings=settings)
    assert isinstance(same, jury.Batch) and same.status() == batch.status()
    assert same.status().status == BatchState.RUNNING
    with pytest.raises(BatchRunningError, match=rf"batch {batch.id} is running \(0 of 6"):
        same.results(wait=False)
    with pytest.raises(WaitTimeoutError, match=r"still running after 0\.5 s"):
        same.results(timeout=0.5)
    assert list(same.records()) == []  # what is stored so far, asked for as such

    cancelled = same.cancel()
    assert cancelled.state == BatchState.CANCELLED and cancelled.open_provider_batches == 0
    assert batch.cancel().state == BatchState.CANCELLED  # already ended: left as it is
    results = batch.results(wait=False)
    assert results.status.status == BatchState.CANCELLED and results.records == []
    with pytest.raises(UnknownBatchError, match="no batch 'nope'"):
        jury.attach("nope", settings=settings)


def test_prepare_plans_without_queueing_and_cleans_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with prepare(spec("http://127.0.0.1:1/v1"), items=ITEMS, sample=2, seed=1) as prepared:
        plan = prepared.plan()
        assert (prepared.n_items, prepared.n_cells, plan.calls) == (2, 4, 4 * 3)
        assert len(list(tmp_path.iterdir())) == 1  # the dict's batch file, while prepared
    assert list(tmp_path.iterdir()) == []


def test_evaluate_with_the_simulator_refuses_a_deployment_with_the_reason() -> None:
    with pytest.raises(jury.JuryError, match="starts the judge simulator on this machine"):
        jury.evaluate(spec("${JURY_SIMULATOR_URL}"), items=ITEMS, simulator=True, embedded=False)


def test_a_dict_batch_interrupted_mid_submission_keeps_its_files_for_resume(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C after the batch was recorded, before its items were all queued: the batch is
    left `submitting`, and `jury resume` reads its batch file again, so the temporary folder
    written from the dict stays, named in a note on the KeyboardInterrupt."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")

    def recorded_then_interrupted(source: BatchSource, sessions: Sessions, *args: object) -> str:
        batch_id = str(args[-1])
        create_batch(sessions, batch_id, source.config, str(source.path), source.stats.count)
        raise KeyboardInterrupt

    monkeypatch.setattr("jury.api.submission.submit_batch", recorded_then_interrupted)
    with pytest.raises(KeyboardInterrupt) as stopped:
        jury.submit(spec("http://127.0.0.1:1/v1"), items=ITEMS, settings=settings)
    (kept,) = [p for p in tmp_path.iterdir() if p.name.startswith("jury-batch-")]
    assert (kept / "batch.json").exists() and (kept / "items.jsonl").exists()
    assert f"is kept in {kept} for `jury resume" in " ".join(stopped.value.__notes__)
