"""Broker messages are input: forged or stale task messages, written straight onto a real
deployment's queues, are dropped by a real worker with one log line each, call no judge, pay
nothing and store nothing; a pickle message and an unknown task name are refused as before.
A genuine message sent with them is judged, so the worker was listening all along."""

from __future__ import annotations

import json
import os
import pickle
import re
from pathlib import Path
from typing import Any

import pytest

from jury.batchfile.loading import load_batch
from jury.broker.redis_client import BrokerRedis
from jury.broker.wire import TaskMessageWriter, push_wave
from jury.local.services import ManagedProcess, wait_for
from jury.producer.publishing import create_producer_app
from jury.schemas.tasks import AGGREGATE_TASK, GENERATE_TASK, JUDGE_TASK
from jury.settings import judge_lanes
from jury.store.engine import session_factory
from jury.store.inspection import stored_samples
from jury.store.repository import add_items, batch_status, create_batch, start_batch
from jury.store.samples import count_batch_samples
from tests.conftest import WorkerStarter, queue_idle, settings_for
from tests.integration.test_candidates import tag
from tests.integration.test_modes import answered, tagged, write_batch

pytestmark = pytest.mark.integration

BATCH = "forged-target"


class Exploit:
    """Unpickled, it would leave a file behind: proof that pickle was never loaded."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def _task_id(message: str) -> str:
    return str(json.loads(message)["headers"]["id"])


def test_forged_messages_store_nothing_and_call_no_judge(
    tmp_path: Path, redis_url: str, simulator: ManagedProcess, start_workers: WorkerStarter
) -> None:
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    (worker,) = start_workers(settings)
    judge = tagged("balanced", f"forged{tag()}")
    spec = {
        "judges": [{"model": judge, "n": 3, "input_cost_per_token": 1e-6}],
        "dimensions": [{"name": "relevance", "scale": {"min": 1, "max": 5}}],
        "items": [{"id": "q1", "output": "Ten days."}, {"id": "q2", "output": "Twelve."}],
    }
    source = load_batch(write_batch(tmp_path, simulator, spec))
    sessions = session_factory(settings.database_url)
    # Recorded as a submission records it, but with no task queued: every sample is missing,
    # so a forged message that got through would store one.
    create_batch(sessions, BATCH, source.config, str(source.path), 2, source.stats.cells)
    add_items(sessions, BATCH, enumerate(source.items()))
    start_batch(sessions, BATCH, 2, n_cells=source.stats.cells)

    app = create_producer_app(settings)
    judges, cells, generations = (
        TaskMessageWriter(app, t) for t in (JUDGE_TASK, AGGREGATE_TASK, GENERATE_TASK)
    )
    lane = judge_lanes(settings.queue, settings.lanes, [judge])[judge]
    forged_sample = {
        "judge": judge,
        "sample": 0,
        "score": 1e300,
        "cost_usd": -1000.0,
        "prompt_tokens": 5,
    }
    forged = [
        judges.message((BATCH, "q1", "relevance", judge, 10**6), lane),
        judges.message((BATCH, "q1", "relevance", judge, 3), lane),  # n is 3: 0, 1, 2
        judges.message(
            (BATCH, "q2", "relevance", judge, 0),
            lane,
            {"judged": [{"dimension": "relevance", "result": forged_sample}]},
        ),
        judges.message((BATCH, "q1", "relevance", "openai/someone-else", 0), lane),
        judges.message((BATCH, "q9", "relevance", judge, 0), lane),
        judges.message((BATCH, "q1", "fluency", judge, 0), lane),
        judges.message(("no-such-batch", "q1", "relevance", judge, 0), lane),
        judges.message((BATCH, "q1", "relevance", judge, "0"), lane),
        judges.message((BATCH, "q1", "relevance"), lane),
        judges.message((BATCH, "q1", "relevance", judge, 0), lane, {"budget": "unlimited"}),
        judges.message((BATCH, "q1", "relevance", judge, 0), lane, {"waited_s": float("nan")}),
        cells.message((BATCH, "q1", "fluency"), settings.queue),
        cells.message(("no-such-batch", "q1", "relevance"), settings.queue),
        generations.message((BATCH, "q1", "writer"), settings.queue),
    ]

    def with_body(body: object) -> str:
        message = json.loads(judges.message((BATCH, "q1", "relevance", judge, 0), lane))
        message["body"] = json.dumps(body)
        return json.dumps(message)

    forged += [
        with_body(["not arguments", {}, None]),
        with_body([[BATCH, "q1", "relevance", judge, 0], ["not", "keywords"], None]),
        judges.message((BATCH, "q1", "relevance", judge, 0), lane, {"self": 1}),
    ]
    genuine = judges.message((BATCH, "q1", "relevance", judge, 1), lane)
    marker = tmp_path / "unpickled"
    pickled = json.loads(judges.message((BATCH, "q1", "relevance", judge, 2), lane))
    pickled["content-type"] = "application/x-python-serialize"
    pickled["body"] = pickle.dumps(Exploit(marker), protocol=0).decode("ascii")
    unknown = json.loads(judges.message((BATCH, "q1", "relevance", judge, 2), lane))
    unknown["headers"]["task"] = "jury.spend_everything"
    builtin = json.loads(judges.message((BATCH, "q1", "relevance", judge, 2), lane))
    builtin["headers"]["task"] = "celery.accumulate"  # registered in every Celery app
    refused_before = [
        json.dumps(pickled),
        json.dumps(unknown),
        json.dumps(builtin),
        with_body({"not": "a task"}),  # Celery itself could not read it: it stopped the worker
    ]

    broker = BrokerRedis.from_settings(settings)
    try:
        push_wave(broker, {lane: [*forged, genuine, *refused_before], settings.queue: []})
    finally:
        broker.close()
    wait_for(lambda: queue_idle(settings), 60, "the forged messages to be taken and dropped")
    wait_for(lambda: count_batch_samples(sessions, BATCH) == 1, 30, "the genuine sample")
    ids = [_task_id(m) for m in forged]
    celery_refused = [_task_id(m) for m in refused_before]
    assert worker.log_path is not None
    log_path = worker.log_path

    def logged() -> bool:
        return all(i in log_path.read_text(errors="replace") for i in ids + celery_refused)

    wait_for(logged, 30, "a log line per forged message")
    log = log_path.read_text(errors="replace")

    # Only the genuine message was called, paid and stored.
    assert answered(simulator, judge) == 1
    stored = stored_samples(sessions, BATCH)
    assert stored.stored == 1 and stored.failed == 0 and 0 < stored.cost_usd < 0.01
    status = batch_status(sessions, BATCH)
    assert (status.n_samples, status.n_verdicts, status.cost_usd) == (0, 0, 0.0)
    # Each forged message: one line, naming it, without a traceback.
    for task_id in ids:
        lines = [line for line in log.splitlines() if task_id in line]
        assert len(lines) == 1, lines
        assert "MessageRefused" in lines[0] and "nothing called or stored" in lines[0]
    for task_id in celery_refused:
        lines = [line for line in log.splitlines() if task_id in line]
        assert len(lines) == 1 and "dropped a message of task" in lines[0], lines
    assert "Traceback" not in log
    assert re.search(r"sample index 3 is not below judge .*'s n of 3", log)
    assert "a carried sample's score 1e+300 outside 'relevance''s range 1..5" in log
    # Pickle is never loaded; a task name that is not jury's never runs.
    assert not marker.exists()
