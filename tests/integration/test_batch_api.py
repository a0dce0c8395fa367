"""Judges through the providers' Batch APIs (docs/batch-api.md), end to end: the simulator's
files and batches endpoints over HTTP, real Redis, real `jury worker` processes, SQLite.

Each test has a simulator of its own (a fixed port and a folder of its own, so that it can be
killed and started again on the same batches) with a short completion delay."""

from __future__ import annotations

import json
import socket
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
import redis
from rich.console import Console
from sqlalchemy import select

from jury.batchfile.loading import load_batch
from jury.broker.keys import batch_api_lock
from jury.local.services import ManagedProcess, start_simulator, wait_for
from jury.producer.publishing import create_producer_app
from jury.producer.submission import submit_batch
from jury.results.html.report import build_report
from jury.results.provider_batches import print_provider_batches, provider_batches_json
from jury.schemas.provider_batches import ENDED, STORED, SUBMITTING
from jury.schemas.status import BatchState
from jury.settings import Settings
from jury.store.engine import session_factory
from jury.store.models import SampleRow
from jury.store.provider_batches import provider_batches
from jury.store.repository import batch_status
from tests.conftest import SIMULATOR_SEED, WorkerStarter, settings_for
from tests.integration.test_pipeline import ITEMS, write_batch

pytestmark = pytest.mark.integration

# Short collection window, polls and locks, so that a test takes seconds.
FAST = {
    "JURY_BATCH_API_STEP": "0.2",
    "JURY_BATCH_API_WINDOW": "0.5",
    "JURY_BATCH_API_POLL": "0.3",
    "JURY_BATCH_API_LOCK": "2",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def batch_simulator(logs_dir: Path, folder: Path, *options: str) -> ManagedProcess:
    args = ["--seed", str(SIMULATOR_SEED), "--port", str(_free_port())]
    return start_simulator(logs_dir, [*args, "--batch-dir", str(folder), *options])


@pytest.fixture
def sim_factory(logs_dir: Path, tmp_path: Path) -> Iterator[Any]:
    started: list[ManagedProcess] = []

    def start(*options: str) -> ManagedProcess:
        process = batch_simulator(logs_dir, tmp_path / "sim-batches", *options)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop(grace=3)


def _sim_batches(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in (folder / "batches").glob("*.json")]


def _file_ids(folder: Path, file_id: str | None) -> list[str]:
    """The custom_ids of a simulator's file, read from its folder (not slowed down)."""
    if not file_id:
        return []
    content = (folder / "files" / file_id).read_text()
    return [json.loads(line)["custom_id"] for line in content.splitlines() if line]


def submitted_lines(folder: Path) -> Counter[str]:
    """How many times each custom_id was submitted, over every batch the simulator holds."""
    return Counter(c for b in _sim_batches(folder) for c in _file_ids(folder, b["input_file_id"]))


def failed_lines(folder: Path) -> Counter[str]:
    return Counter(c for b in _sim_batches(folder) for c in _file_ids(folder, b["error_file_id"]))


def submit(settings: Settings, batch_file: Path) -> str:
    sessions = session_factory(settings.database_url)
    return submit_batch(load_batch(batch_file), sessions, create_producer_app(settings))


def wait_finished(settings: Settings, batch_id: str, timeout: float) -> BatchState:
    sessions = session_factory(settings.database_url)
    wait_for(lambda: batch_status(sessions, batch_id).status.finished, timeout, "the batch")
    return batch_status(sessions, batch_id).status


def sample_keys(settings: Settings, batch_id: str) -> Counter[tuple[str, str, str, int]]:
    sessions = session_factory(settings.database_url)
    with sessions() as session:
        rows = session.execute(
            select(SampleRow.item_id, SampleRow.dimension, SampleRow.judge, SampleRow.sample).where(
                SampleRow.batch_id == batch_id
            )
        ).all()
    return Counter((r[0], r[1], r[2], r[3]) for r in rows)


def lock_holder(settings: Settings, workers: list[ManagedProcess], name: str) -> ManagedProcess:
    """The worker process holding a provider batch lock (its value ends with the pid)."""
    client = redis.Redis.from_url(settings.broker_url)
    try:
        # the client does not decode responses: a value is bytes
        held = cast(bytes | None, client.get(batch_api_lock(settings.queue, name)))
    finally:
        client.close()
    assert held is not None, f"nobody holds {name}"
    pid = int(held.decode().rsplit(":", 1)[1])
    (holder,) = [w for w in workers if w.process.pid == pid]
    return holder


def test_mixed_panel_through_kill_9_of_submitter_simulator_and_poller(
    redis_url: str, tmp_path: Path, start_workers: WorkerStarter, sim_factory: Any
) -> None:
    """A live judge and a batch judge complete the same cells, through kill -9 of the worker
    while the provider creates its batch (the provider has it, our store does not know its
    id), of the simulator mid-batch, and of the worker reading a batch's results; lines the
    provider failed go into the next provider batch. Every sample is stored once, every cell
    aggregated once, no request is sent again unless its line failed, and the batch judge's
    samples cost half of the live price."""
    sim = sim_factory(
        *("--batch-delay", "0.5", "--batch-error-rate", "0.15"),
        *("--batch-create-delay", "30", "--batch-file-delay", "30"),
    )
    folder = tmp_path / "sim-batches"
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    # No line fails 6 times; the live tasks a killed worker held run again within 3 s, and
    # their retries (0.5 s doubling to 2 s: ~7 s in all) outlast the simulator's restart.
    # With the suite's 0.05–0.2 s they were spent in a second, while it was down (a full
    # run ended degraded: two live samples failed with connection errors).
    settings = settings.model_copy(
        update={
            "max_attempts": 6,
            "heartbeat_timeout_s": 3.0,
            "retry_base_delay_s": 0.5,
            "retry_max_delay_s": 2.0,
        }
    )
    sessions = session_factory(settings.database_url)
    workers = start_workers(settings, 3, **FAST)
    prices = {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}
    judges = [
        {"model": "openai/lenient", "name": "batched", "n": 2, "batch_api": True, **prices},
        {"model": "openai/strict", "n": 1, **prices},
    ]
    batch_id = submit(settings, write_batch(tmp_path, sim, judges))
    wait_for(lambda: bool(_sim_batches(folder)), 30, "the provider to hold the batch")
    lock_holder(settings, workers, "submit").process.kill()
    (intent,) = provider_batches(sessions, batch_id)
    assert intent.state == SUBMITTING and intent.provider_id is None
    sim.process.kill()
    sim.process.wait(5)
    sim.restart()
    wait_for(lambda: _answers(sim), 30, "the simulator back")
    # Another worker finds the batch by its metadata, polls it, and is killed reading it.
    wait_for(
        lambda: any(b.state == ENDED for b in provider_batches(sessions, batch_id)),
        30,
        "a provider batch ended",
    )
    ended = next(b for b in provider_batches(sessions, batch_id) if b.state == ENDED)
    lock_holder(settings, workers, f"poll:{ended.id}").process.kill()
    assert wait_finished(settings, batch_id, 60) == BatchState.COMPLETED

    keys = sample_keys(settings, batch_id)
    assert len(keys) == len(ITEMS) * 2 * 3 and set(keys.values()) == {1}
    assert batch_status(sessions, batch_id).n_verdicts == len(ITEMS) * 2
    assert all(b.state == STORED for b in provider_batches(sessions, batch_id))
    sent, failed = submitted_lines(folder), failed_lines(folder)
    assert len(sent) == len(ITEMS) * 2 * 2  # every request of the batch judge was submitted
    assert all(sent[cid] == failed[cid] + 1 for cid in sent), "a request was sent twice"
    console = Console(record=True, width=160)
    print_provider_batches(sessions, batch_id, console)
    shown = console.export_text()
    assert "provider batches" in shown and "stored (completed)" in shown
    assert all(b["state"] == STORED for b in provider_batches_json(sessions, batch_id))
    assert 'id="provider-batches"' in build_report(sessions, batch_id)
    with sessions() as session:
        costs = session.execute(
            select(
                SampleRow.judge,
                SampleRow.cost_usd,
                SampleRow.prompt_tokens,
                SampleRow.completion_tokens,
            ).where(SampleRow.batch_id == batch_id)
        ).all()
    for judge, cost, prompt, completion in costs:
        full = prompt * 1e-6 + completion * 2e-6
        assert cost == pytest.approx(full / 2 if judge == "batched" else full, rel=1e-6)


def _answers(sim: ManagedProcess) -> bool:
    try:
        return httpx.get(f"{sim.url.removesuffix('/v1')}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_simulator_batches_cancel_expire_and_survive_a_restart(sim_factory: Any) -> None:
    """The simulator's batches endpoints: a batch is listed and found by its metadata, is
    cancelled, expires, and is still there after a kill -9 and a restart."""
    sim = sim_factory("--batch-delay", "60", "--batch-expire", "1")
    base = sim.url
    line = {"custom_id": "c0", "method": "POST", "url": "/v1/chat/completions", "body": {}}
    upload = httpx.post(
        f"{base}/files",
        data={"purpose": "batch"},
        files={"file": ("in.jsonl", json.dumps(line).encode() + b"\n")},
    ).json()
    create = {"input_file_id": upload["id"], "endpoint": "/v1/chat/completions"}
    first = httpx.post(f"{base}/batches", json={**create, "metadata": {"k": "1"}}).json()
    second = httpx.post(f"{base}/batches", json={**create, "metadata": {"k": "2"}}).json()
    assert first["request_counts"]["total"] == 1
    listed = httpx.get(f"{base}/batches", params={"limit": 1}).json()
    assert listed["has_more"] and listed["data"][0]["id"] == second["id"]
    after = httpx.get(f"{base}/batches", params={"limit": 1, "after": listed["last_id"]}).json()
    assert after["data"][0]["metadata"] == {"k": "1"}
    httpx.post(f"{base}/batches/{first['id']}/cancel")
    sim.process.kill()
    sim.process.wait(5)
    sim.restart()
    wait_for(lambda: _answers(sim), 30, "the simulator back")

    def status(batch: dict[str, Any]) -> str:
        return str(httpx.get(f"{base}/batches/{batch['id']}").json()["status"])

    wait_for(lambda: status(first) == "cancelled" and status(second) == "expired", 10, "ends")
    assert httpx.get(f"{base}/batches/batch_nosuch").status_code == 404
