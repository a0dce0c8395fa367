"""The store on SQLite and PostgreSQL (idempotent writes, progress counters), the messages on
the wire (references, not item text), and the embedded Redis."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from jury.batchfile.loading import load_batch
from jury.broker.redis_client import BrokerRedis
from jury.broker.wire import TaskMessageWriter, push_wave
from jury.local.services import redis_answers, start_embedded_redis
from jury.producer.publishing import Publisher, all_samples, create_producer_app
from jury.producer.submission import submit_batch
from jury.schemas.batch import BatchConfig, Item
from jury.schemas.results import CellSample, SampleResult
from jury.schemas.status import BatchState
from jury.schemas.tasks import AGGREGATE_TASK, JUDGE_TASK, CellRef, SampleRef
from jury.store.cells import iter_verdicts, save_cell
from jury.store.engine import session_factory
from jury.store.repository import add_items, batch_status, create_batch, start_batch
from jury.store.samples import list_samples, record_samples
from jury.worker.judging.aggregation import build_verdict
from tests.conftest import queued_messages, settings_for

CONFIG = BatchConfig.model_validate(
    {
        "name": "store-test",
        "judges": [{"model": "openai/a", "n": 2}, {"model": "openai/b", "n": 1}],
        "dimensions": ["relevance", "accuracy"],
    }
)


def _samples(item: str) -> list[SampleResult]:
    return [
        SampleResult(judge="openai/a", sample=0, score=4, cost_usd=0.01),
        SampleResult(judge="openai/a", sample=1, score=5, cost_usd=0.01),
        SampleResult(judge="openai/b", sample=0, error="boom", error_kind="server_error"),
    ]


def test_save_cell_is_idempotent_and_completes_the_batch(database_url: str) -> None:
    sessions = session_factory(database_url)
    batch_id = f"b-{secrets.token_hex(4)}"
    create_batch(sessions, batch_id, CONFIG, "inline")
    items = [Item(id="x", output="o"), Item(id="y", output="p")]
    assert add_items(sessions, batch_id, enumerate(items)) == 2
    assert add_items(sessions, batch_id, enumerate(items)) == 0  # re-adding changes nothing
    start_batch(sessions, batch_id, n_items=2, n_dimensions=2)

    cells = [CellRef(batch_id, i.id, d.name) for i in items for d in CONFIG.dimensions]
    for position, cell in enumerate(cells):
        dimension = CONFIG.dimension(cell.dimension)
        samples = _samples(cell.item_id)
        stored = [CellSample(dimension=cell.dimension, result=s) for s in samples]
        record_samples(sessions, batch_id, cell.item_id, stored)
        verdict = build_verdict(cell.item_id, dimension, CONFIG.panel, samples, CONFIG.aggregation)
        positions = (position // 2, position % 2)
        assert save_cell(sessions, cell, samples, verdict, positions) is True
        # A second run of the same callback (a duplicate delivery) changes nothing.
        assert save_cell(sessions, cell, samples, verdict, positions) is False

    status = batch_status(sessions, batch_id)
    # Judge b failed every sample: the batch ran to its end, degraded.
    assert status.status == BatchState.DEGRADED and status.finished_at is not None
    assert (status.n_verdicts, status.n_samples, status.n_failed_samples) == (4, 12, 4)
    assert status.cost_usd == pytest.approx(0.08)
    assert status.n_flagged == 4  # judge b produced no score anywhere

    verdicts = list(iter_verdicts(sessions, batch_id, chunk=3))  # several chunks
    assert [(v.item_id, v.criterion_id) for v in verdicts] == [
        (c.item_id, c.dimension) for c in cells
    ]
    assert verdicts[0].llm_evaluations["openai/a"].samples == [4, 5]
    listed = list_samples(sessions, cells[0])
    assert [(s.judge, s.sample, s.score, s.error) for s in listed] == [
        ("openai/a", 0, 4, None),
        ("openai/a", 1, 5, None),
        ("openai/b", 0, None, "boom"),
    ]


def test_messages_carry_references_not_item_text(tmp_path: Path, redis_url: str) -> None:
    """The queued message is the same size for a 200 KB item as for a 10-byte one."""
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    big, small = "x" * 200_000, "tiny item"
    items = tmp_path / "items.jsonl"
    items.write_text(
        json.dumps({"id": "big", "output": big})
        + "\n"
        + json.dumps({"id": "sml", "output": small})
        + "\n"
    )
    batch = tmp_path / "batch.yaml"
    batch.write_text(
        "name: wire\njudges: [{model: openai/balanced, n: 1}]\n"
        "dimensions: [relevance]\nitems: items.jsonl\n"
    )
    app = create_producer_app(settings)
    submit_batch(load_batch(batch), session_factory(settings.database_url), app)
    messages = queued_messages(settings, drain=True)
    sizes = {json.loads(json.loads(m)["body"])[0][1]: len(m) for m in messages}
    assert set(sizes) == {"big", "sml"}
    assert abs(sizes["big"] - sizes["sml"]) <= 8  # only the random task ids may differ
    assert all(big[:100].encode() not in m for m in messages)
    # Celery's task protocol 2 in kombu's envelope, no chord: under 1 KB.
    assert max(sizes.values()) < 1024, sizes
    print(f"queued message sizes in bytes: {sizes}")


def test_publish_sends_one_task_per_sample(tmp_path: Path, redis_url: str) -> None:
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    app = create_producer_app(settings)
    refs = [
        SampleRef("b1", item, dimension.name, judge, index)
        for item in ("i1", "i2")
        for dimension in CONFIG.dimensions
        for judge, index in all_samples(CONFIG)
    ]
    sent = Publisher(app, CONFIG).publish(refs)
    messages = [json.loads(m) for m in queued_messages(settings, drain=True)]
    bodies = [json.loads(m["body"]) for m in messages]
    # Each judge of the panel has a lane (queue) of its own.
    lanes = {
        (b[0][3], m["properties"]["delivery_info"]["routing_key"])
        for b, m in zip(bodies, messages, strict=True)
    }
    assert lanes == {
        ("openai/a", f"{settings.queue}.lane0"),
        ("openai/b", f"{settings.queue}.lane1"),
    }
    assert sent == len(bodies) == 2 * 2 * 3
    cells = sorted(tuple(body[0]) for body in bodies)
    assert cells == sorted(
        ("b1", i, d, j, s)
        for i in ("i1", "i2")
        for d in ("relevance", "accuracy")
        for j, n in (("openai/a", 2), ("openai/b", 1))
        for s in range(n)
    )
    assert all(body[2]["chord"] is None for body in bodies)
    assert all(m["headers"]["ignore_result"] for m in messages)


def test_embedded_redis_starts_and_stops(tmp_path: Path) -> None:
    server = start_embedded_redis(tmp_path)
    try:
        assert redis_answers(server.url)
    finally:
        server.stop()
    assert not server.alive() and not redis_answers(server.url)


@pytest.mark.parametrize("task", [JUDGE_TASK, AGGREGATE_TASK])
def test_hand_written_messages_match_celerys_own(tmp_path: Path, redis_url: str, task: str) -> None:
    """The producer writes Celery's task protocol 2 by hand: every field a worker, Flower or
    kombu reads must be what `app.send_task` itself writes, after any upgrade of either."""
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    app = create_producer_app(settings)
    queue = settings.queue
    args = ("b1", "i1", "relevance", "openai/a", 0) if task == JUDGE_TASK else ("b1", "i1", "rel")
    broker = BrokerRedis.from_settings(settings)
    try:
        push_wave(broker, {queue: [TaskMessageWriter(app, task).message(args, queue)]})
        app.send_task(task, args=list(args), queue=queue, ignore_result=True)
    finally:
        broker.close()
    messages = [json.loads(m) for m in queued_messages(settings, drain=True)]
    # Celery names its tasks with UUIDs (36 characters), the producer with 16.
    ours, celerys = sorted(messages, key=lambda m: len(m["headers"]["id"]))
    assert set(ours) == set(celerys)
    for field in ("content-encoding", "content-type"):
        assert ours[field] == celerys[field]
    assert json.loads(ours["body"]) == json.loads(celerys["body"])
    # Per task: its id (ours is shorter), and where it came from.
    per_task = {"id", "root_id", "origin"}
    assert set(ours["headers"]) == set(celerys["headers"])
    for key in set(ours["headers"]) - per_task:
        assert ours["headers"][key] == celerys["headers"][key], key
    assert ours["headers"]["id"] == ours["headers"]["root_id"]
    # No reply_to (nobody waits for a result); the rest as kombu writes it.
    unique = {"correlation_id", "delivery_tag", "reply_to"}
    assert set(ours["properties"]) == set(celerys["properties"]) - {"reply_to"}
    for key in set(ours["properties"]) - unique:
        assert ours["properties"][key] == celerys["properties"][key], key
    assert ours["properties"]["correlation_id"] == ours["headers"]["id"]
