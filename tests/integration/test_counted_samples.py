"""The store's side of reading samples as input, on real SQLite and PostgreSQL: a row no
worker of this version wrote (a score off its scale, a cost below zero, an index beyond the
judge's `n`, a dimension the batch lacks) never counts toward a verdict, a batch's progress
or its cost; and a judge task refuses a carried sample that could not be true."""

from __future__ import annotations

import pytest

from jury.errors import MessageRefused
from jury.schemas.results import CellSample, SampleResult
from jury.schemas.tasks import CellRef, SampleRef
from jury.store.inspection import stored_samples
from jury.store.repository import batch_status
from jury.store.samples import count_batch_samples, record_samples
from jury.worker.judging.cell_verdict import aggregate_cell
from jury.worker.judging.pipeline import judge_task
from jury.worker.runtime import WorkerRuntime
from tests.integration.test_chord import Recorder, runtime_and_cell

__all__ = ["runtime_and_cell"]  # the fixture, shared

pytestmark = pytest.mark.integration
JUDGE = "openai/scripted"  # n: 2, dimension relevance on 1..5 (test_chord's runtime_and_cell)


def _row(sample: int, score: float | None, cost: float, dimension: str = "relevance") -> CellSample:
    result = SampleResult(judge=JUDGE, sample=sample, score=score, cost_usd=cost)
    return CellSample(dimension=dimension, result=result)


def test_stored_rows_that_cannot_be_true_never_count(
    runtime_and_cell: tuple[WorkerRuntime, Recorder, CellRef],
) -> None:
    runtime, _, cell = runtime_and_cell
    sessions = runtime.sessions
    try:
        rows = [
            _row(0, 1e300, -1000.0),  # off the scale, and a cost that is not one
            _row(1, 4.0, 0.01),
            _row(10**6, 3.0, 0.5),  # beyond the judge's n
            _row(0, 2.0, 0.5, dimension="fluency"),  # not one of the batch's dimensions
        ]
        record_samples(sessions, cell.batch_id, cell.item_id, rows)
        assert count_batch_samples(sessions, cell.batch_id) == 4  # there, but…
        counted = stored_samples(sessions, cell.batch_id)
        assert (counted.stored, counted.failed) == (2, 1)
        assert counted.cost_usd == pytest.approx(0.01)

        verdict = aggregate_cell(runtime, cell).verdict
        assert verdict is not None
        evaluation = verdict.llm_evaluations[JUDGE]
        assert (evaluation.samples, evaluation.n_failed) == ([4.0], 1)
        assert verdict.consensus_metrics.final_score == 4.0
        status = batch_status(sessions, cell.batch_id)
        assert (status.n_samples, status.n_failed_samples) == (2, 1)
        assert status.cost_usd == pytest.approx(0.01)
    finally:
        runtime.close()


def test_a_judge_task_refuses_carried_samples_that_cannot_be_true(
    runtime_and_cell: tuple[WorkerRuntime, Recorder, CellRef],
) -> None:
    runtime, recorder, cell = runtime_and_cell
    try:
        forged = [
            [_row(0, 1e300, 0.0)],
            [_row(0, 4.0, -1000.0)],
            [_row(0, float("nan"), 0.0)],
            [_row(1, 4.0, 0.0)],  # another sample's, carried by sample 0's task
            [_row(0, 4.0, 0.0), _row(0, 4.0, 0.0)],
        ]
        for judged in forged:
            with pytest.raises(MessageRefused, match="nothing called or stored"):
                runtime.loop.run(judge_task(runtime, SampleRef(*cell, JUDGE, 0), judged))
        with pytest.raises(MessageRefused, match="sample index 2 is not below"):
            runtime.loop.run(judge_task(runtime, SampleRef(*cell, JUDGE, 2)))
        assert count_batch_samples(runtime.sessions, cell.batch_id) == 0
        assert recorder.callbacks == []
    finally:
        runtime.close()
