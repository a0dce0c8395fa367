"""The chord: one callback per complete cell, exactly once.

In process, fast (the exactly-once core, on real SQLite/PostgreSQL and a real Redis, with a
scripted judge): a task delivered twice stores one sample and sends no second callback; two
tasks completing a cell at the same moment send one callback between them. With real worker
processes: a cell whose last sample was stored and claimed by a worker that died before
sending its callback is aggregated by the sweeper.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import event

from jury.errors import UnknownBatchError
from jury.local.services import ManagedProcess, wait_for
from jury.schemas.batch import BatchConfig, Item, Judge
from jury.schemas.results import CellSample, SampleResult
from jury.schemas.tasks import CellRef, GenerationRef, SampleRef
from jury.settings import Settings
from jury.store.chords import claim_callbacks
from jury.store.engine import session_factory
from jury.store.models import utcnow
from jury.store.repository import add_items, batch_status, create_batch, start_batch
from jury.store.samples import complete_cells_without_verdict, list_samples, record_samples
from jury.worker.engine.sweeper import sweep_once
from jury.worker.judging.cell_verdict import aggregate_cell
from jury.worker.judging.pipeline import claim_complete_cells, judge_task
from jury.worker.runtime import WorkerRuntime
from tests.conftest import settings_for
from tests.integration.test_faults import assert_exactly_once, one_cell_batch


@dataclass(frozen=True)
class Reply:
    text: str = '{"score": 4, "reasoning": "fine"}'
    prompt_tokens: int = 10
    completion_tokens: int = 5
    cost_usd: float = 0.0
    latency_ms: float = 1.0


async def scripted_judge(judge: Judge, messages: list[dict[str, str]]) -> Reply:
    return Reply()


class Recorder:
    """The runtime's ways out (jury.worker.engine.queues.TaskQueues), recorded instead of sent."""

    def __init__(self) -> None:
        self.callbacks: list[CellRef] = []
        self.tasks: list[tuple[SampleRef, str]] = []
        self.generations: list[GenerationRef] = []
        self.parked: list[tuple[object, ...]] = []

    def send_callbacks(self, cells: list[CellRef]) -> None:
        self.callbacks.extend(cells)

    def publish(self, tasks: list[tuple[SampleRef, str]]) -> None:
        self.tasks.extend(tasks)

    def publish_generations(self, refs: list[GenerationRef]) -> None:
        self.generations.extend(refs)

    def park(self, *task: object, **options: object) -> None:
        self.parked.append(task)


@pytest.fixture
def runtime_and_cell(redis_url: str, database_url: str) -> tuple[WorkerRuntime, Recorder, CellRef]:
    settings = settings_for(redis_url, database_url)
    recorder = Recorder()
    runtime = WorkerRuntime(settings, recorder, call=scripted_judge)
    config = BatchConfig.model_validate(
        {"judges": [{"model": "openai/scripted", "n": 2}], "dimensions": ["relevance"]}
    )
    batch_id = f"chord-{settings.queue}"
    create_batch(runtime.sessions, batch_id, config, "test")
    add_items(runtime.sessions, batch_id, [(0, Item(id="a", output="an answer"))])
    start_batch(runtime.sessions, batch_id, n_items=1, n_dimensions=1)
    return runtime, recorder, CellRef(batch_id, "a", "relevance")


def test_a_task_delivered_twice_sends_no_second_callback(
    runtime_and_cell: tuple[WorkerRuntime, Recorder, CellRef],
) -> None:
    runtime, recorder, cell = runtime_and_cell
    try:
        for sample in (0, 0, 1, 1, 0):  # every delivery of each task, in any order
            outcome = runtime.loop.run(
                judge_task(runtime, SampleRef(*cell, "openai/scripted", sample))
            )
            assert [s.result.score for s in outcome.samples] == [4.0]
        assert recorder.callbacks == [cell]
        assert [s.sample for s in list_samples(runtime.sessions, cell)] == [0, 1]
        # The callback itself, run twice, writes one verdict.
        first = aggregate_cell(runtime, cell)
        again = aggregate_cell(runtime, cell)
        assert first.verdict == again.verdict and first.verdict is not None
        status = batch_status(runtime.sessions, cell.batch_id)
        assert (status.n_verdicts, status.n_samples, status.status.value) == (1, 2, "completed")
    finally:
        runtime.close()


def store_both_samples(runtime: WorkerRuntime, cell: CellRef) -> None:
    """The cell's two samples, stored as the judge tasks would, without their completion."""
    for sample in (0, 1):
        result = SampleResult(judge="openai/scripted", sample=sample, score=3.0)
        record_samples(
            runtime.sessions,
            cell.batch_id,
            cell.item_id,
            [CellSample(dimension=cell.dimension, result=result)],
        )


def test_two_tasks_completing_a_cell_at_once_send_one_callback(
    runtime_and_cell: tuple[WorkerRuntime, Recorder, CellRef],
) -> None:
    """Both last samples are stored before either counts: both find the cell complete, and the
    claim lets exactly one of them send the callback."""
    runtime, _, cell = runtime_and_cell
    try:
        store_both_samples(runtime, cell)
        claimed: list[list[CellRef]] = []
        barrier = threading.Barrier(4)

        def finish() -> None:
            barrier.wait()
            claimed.append(claim_complete_cells(runtime, [cell]))

        threads = [threading.Thread(target=finish) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert sorted(len(c) for c in claimed) == [0, 0, 0, 1]
    finally:
        runtime.close()


def test_the_sweeper_leaves_a_freshly_claimed_cell_to_its_callback(
    runtime_and_cell: tuple[WorkerRuntime, Recorder, CellRef],
) -> None:
    """A cell claimed within the last sweep interval has its callback on the way: the sweeper
    does not aggregate it too. An unclaimed complete cell, or one claimed an interval ago and
    still without a verdict, is the sweeper's."""
    runtime, _, cell = runtime_and_cell
    try:
        store_both_samples(runtime, cell)
        now = utcnow()
        unclaimed = complete_cells_without_verdict(runtime.sessions, cell.batch_id, 2, now)
        assert unclaimed == [cell]
        assert claim_complete_cells(runtime, [cell]) == [cell]
        a_minute_ago = now - timedelta(seconds=60)
        fresh = complete_cells_without_verdict(runtime.sessions, cell.batch_id, 2, a_minute_ago)
        assert fresh == []
        if runtime.settings.database_url.startswith("sqlite"):  # no other test's batches
            assert sweep_once(runtime) == 0
            assert batch_status(runtime.sessions, cell.batch_id).n_verdicts == 0
        later = utcnow() + timedelta(seconds=1)
        stale = complete_cells_without_verdict(runtime.sessions, cell.batch_id, 2, later)
        assert stale == [cell]
    finally:
        runtime.close()


def runtime_with_items(redis_url: str, tmp_path: Path, batch_id: str, n: int) -> WorkerRuntime:
    """A worker runtime on a SQLite file holding one batch of `n` items, i0 … i<n-1>."""
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    runtime = WorkerRuntime(settings, Recorder(), call=scripted_judge)
    config = BatchConfig.model_validate(
        {"judges": [{"model": "openai/scripted"}], "dimensions": ["relevance"]}
    )
    create_batch(runtime.sessions, batch_id, config, "test")
    add_items(runtime.sessions, batch_id, [(i, Item(id=f"i{i}", output="a")) for i in range(n)])
    return runtime


def test_verdict_positions_come_from_memory_or_one_query(redis_url: str, tmp_path: Path) -> None:
    """A verdict's item position: remembered from an item this worker read, or, for items
    read long ago, all read in one query; an item that is not there is an UnknownBatchError."""
    runtime = runtime_with_items(redis_url, tmp_path, "pos", 4)
    try:
        assert runtime.item("pos", "i2").id == "i2"  # read for a task: its position kept
        statements: list[str] = []
        engine = runtime.sessions.kw["bind"]
        event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
        wanted = [("pos", "i3"), ("pos", "i0"), ("pos", "i2"), ("pos", "i3")]
        assert runtime.item_positions(wanted) == {
            ("pos", "i0"): 0,
            ("pos", "i2"): 2,
            ("pos", "i3"): 3,
        }
        queries = [s for s in statements if s.startswith("SELECT")]
        assert len(queries) == 1  # i2 remembered; i0 and i3 in one query
        assert runtime.item_positions([("pos", "i0")]) == {("pos", "i0"): 0}
        assert len(statements) == len(queries) + 1  # the one query and its BEGIN, no more
        with pytest.raises(UnknownBatchError, match="no item 'gone'"):
            runtime.item_positions([("pos", "gone")])
    finally:
        runtime.close()


def test_a_claimed_callback_never_sent_is_healed_by_the_sweeper(
    sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    """The worker that stored the cell's last sample claimed its callback and died before
    sending it: the cell is complete, without a verdict. A running worker's sweeper
    aggregates it."""
    cell, model, _ = one_cell_batch(sqlite_workers, simulator, "heal")
    sessions = session_factory(sqlite_workers.database_url)
    samples = [
        CellSample(
            dimension=cell.dimension, result=SampleResult(judge=model, sample=i, score=2.0 + i)
        )
        for i in range(3)
    ]
    record_samples(sessions, cell.batch_id, cell.item_id, samples)
    assert claim_callbacks(sessions, [(cell, 0)]) == [cell]
    assert batch_status(sessions, cell.batch_id).n_verdicts == 0
    wait_for(lambda: batch_status(sessions, cell.batch_id).status.finished, 30, "the sweeper")
    assert_exactly_once(sqlite_workers, cell.batch_id)


def test_a_group_of_tasks_reads_its_items_in_one_query(redis_url: str, tmp_path: Path) -> None:
    """The items of a group of tasks the cache lacks are read in one query per batch, then
    served from the cache; one the batch lacks is still an UnknownBatchError when asked for."""
    runtime = runtime_with_items(redis_url, tmp_path, "grp", 5)
    try:
        assert runtime.item("grp", "i1").id == "i1"
        statements: list[str] = []
        engine = runtime.sessions.kw["bind"]
        event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
        runtime.read_items([("grp", f"i{n}") for n in (0, 1, 2, 3, 3, 7)])
        assert len([s for s in statements if s.startswith("SELECT")]) == 1  # i1 was cached
        assert [runtime.item("grp", f"i{n}").id for n in (3, 0, 2, 1)] == ["i3", "i0", "i2", "i1"]
        assert len([s for s in statements if s.startswith("SELECT")]) == 1  # all from the cache
        assert runtime.item_positions([("grp", "i3")]) == {("grp", "i3"): 3}
        with pytest.raises(UnknownBatchError, match="no item 'i7'"):
            runtime.item("grp", "i7")
    finally:
        runtime.close()
