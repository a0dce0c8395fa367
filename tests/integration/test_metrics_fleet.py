"""`jury exporter`: the fleet's figures read from a real Redis and store, served over HTTP as
Prometheus reads them. Tasks are counted per queue and state (another deployment's, on the
same Redis, never), workers alive by their heartbeats, running batches' spend against their
budget; a port it cannot have is one paragraph, a store it cannot read no figure at all."""

from __future__ import annotations

import json
import secrets
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import sqlalchemy
from prometheus_client.parser import text_string_to_metric_families

from jury.broker import keys as redis_keys
from jury.broker.budget import BudgetMeter
from jury.broker.parking import Parking
from jury.broker.redis_client import BrokerRedis
from jury.local.services import free_port, wait_for
from jury.schemas.batch import BatchConfig
from jury.settings import Settings
from jury.store.engine import get_engine, session_factory
from jury.store.models import BatchRow
from jury.store.repository import create_batch, start_batch
from jury.worker.metrics.exporter import fleet_registry
from tests.conftest import ROOT, settings_for, worker_env

pytestmark = pytest.mark.integration
JURY = [sys.executable, "-c", "from jury.cli.main import main; main()"]
# Parked tasks of one lane: more than one step of the count (1000 members) in Redis.
MANY_PARKED = 2_500


def message(batch_id: str) -> str:
    return json.dumps({"body": json.dumps([[batch_id, "i", "d", "j", 0], {}, {}])})


def fill(settings: Settings, other: Settings) -> None:
    """Tasks in every state for `settings`' deployment, and some of `other`'s beside them."""
    broker = BrokerRedis.from_settings(settings)
    client, lane = broker.client, settings.all_queues
    client.rpush(broker.key(lane[1]), *["q"] * 3)
    client.rpush(broker.key(lane[2]), "q")
    client.rpush(broker.key(other.all_queues[1]), *["q"] * 7)  # another deployment's queue
    for n, routing in enumerate([lane[1], lane[1], other.all_queues[1]]):
        client.hset(broker.unacked_key, f"tag-{n}", json.dumps([{"body": "x"}, "", routing]))
    parking = Parking(broker)
    # Members of a set: each message its own (as each task's is).
    parking.park_all([(lane[3], message(f"b{n}"), 600.0) for n in range(MANY_PARKED)])
    parking.park_all([(other.all_queues[3], message(f"b{n}"), 600.0) for n in range(4)])
    model = redis_keys.model_keys(broker.key(redis_keys.RATE_LIMIT_PREFIX), f"m-{settings.queue}")
    # Its one in-flight slot taken for ten minutes: no worker of another test sharing this
    # Redis frees the line meanwhile (the limiter's safety net, release_waiters).
    client.set(model.cap, 1, px=600_000)
    seconds, _ = client.time()
    client.zadd(model.inflight, {"holder": (seconds + 600) * 1000})
    for queue in (lane[4], lane[4], other.all_queues[4]):
        parking.wait_in_line(model.waiters, queue, message("b"))
    beats = broker.key(redis_keys.heartbeats(settings.queue))
    seconds, _ = client.time()
    client.zadd(beats, {"alive": seconds * 1000, "silent": (seconds - 600) * 1000})
    broker.close()


def running_batch_with_spend(settings: Settings, spent_usd: float, cap_usd: float) -> str:
    sessions = session_factory(settings.database_url)
    batch_id = f"budget-{secrets.token_hex(3)}"
    config = BatchConfig.model_validate(
        {"judges": [{"model": "openai/x"}], "dimensions": ["relevance"], "max_cost_usd": cap_usd}
    )
    create_batch(sessions, batch_id, config, "test")
    start_batch(sessions, batch_id, n_items=1, n_dimensions=1)
    broker = BrokerRedis.from_settings(settings)
    broker.client.set(broker.key(redis_keys.batch_mark(settings.queue, batch_id)), settings.queue)
    BudgetMeter(broker, settings.queue, lambda _: 0.0).add_spent(batch_id, spent_usd)
    broker.close()
    return batch_id


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def forget(settings: Settings, other: Settings) -> None:
    """Take back what fill() left in the Redis other tests share: a waiting line counts in
    every producer's back-pressure (Parking.count_for counts every model's lines)."""
    broker = BrokerRedis.from_settings(settings)
    client = broker.client
    model = redis_keys.model_keys(broker.key(redis_keys.RATE_LIMIT_PREFIX), f"m-{settings.queue}")
    client.delete(model.waiters, model.cap, model.inflight)
    client.srem(broker.key(redis_keys.WAITING_LINES), model.waiters)
    ours = tuple(broker.key(q) + "\n" for q in [*settings.all_queues, *other.all_queues])
    parked = broker.key(redis_keys.PARKED)
    doomed = [m for m, _ in client.zscan_iter(parked, count=1000) if m.decode().startswith(ours)]
    for start in range(0, len(doomed), 500):
        client.zrem(parked, *doomed[start : start + 500])
    client.delete(*[broker.key(q) for q in [*settings.all_queues, *other.all_queues]])
    broker.close()


@pytest.fixture
def two_deployments(redis_url: str, tmp_path: Path) -> Iterator[tuple[Settings, Settings]]:
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    other = settings_for(redis_url, f"sqlite:///{tmp_path / 'other.db'}")
    fill(settings, other)
    yield settings, other
    forget(settings, other)


def test_the_exporter_serves_the_fleet_over_http(
    redis_url: str, two_deployments: tuple[Settings, Settings]
) -> None:
    settings, _ = two_deployments
    batch_id = running_batch_with_spend(settings, spent_usd=0.3, cap_usd=1.0)
    port = free_port()
    exporter = subprocess.Popen(
        [*JURY, "exporter", "--port", str(port)],
        env=worker_env(settings),
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}/metrics"

        def answers() -> bool:
            assert exporter.poll() is None, exporter.stderr.read() if exporter.stderr else ""
            try:
                urllib.request.urlopen(url, timeout=1).close()
                return True
            except OSError:
                return False

        wait_for(answers, 60, "the exporter to answer")
        seen = scrape(url)
        # A second exporter on the same port: one paragraph, no traceback.
        second = subprocess.run(
            [*JURY, "exporter", "--port", str(port)],
            env=worker_env(settings),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert second.returncode != 0 and "Traceback" not in second.stderr
        assert f"no free port for metrics in {port}" in second.stderr
    finally:
        exporter.send_signal(signal.SIGTERM)
        assert exporter.wait(15) == 0

    def tasks(lane: int, state: str) -> float:
        queue = settings.all_queues[lane]
        return seen[("jury_tasks", (("queue", queue), ("state", state)))]

    assert (tasks(1, "queued"), tasks(2, "queued"), tasks(0, "queued")) == (3, 1, 0)
    assert tasks(1, "held") == 2
    assert tasks(3, "parked") == MANY_PARKED  # counted in Redis over several steps
    assert tasks(4, "waiting") == 2
    # Nothing of the other deployment's is counted as ours.
    total = sum(v for (name, _), v in seen.items() if name == "jury_tasks")
    assert total == 3 + 1 + 2 + MANY_PARKED + 2
    assert seen[("jury_workers_alive", ())] == 1
    assert seen[("jury_batches_running", ())] == 1
    assert seen[("jury_batch_spent_usd", (("batch", batch_id),))] == pytest.approx(0.3)
    assert seen[("jury_batch_budget_usd", (("batch", batch_id),))] == pytest.approx(1.0)
    assert seen[("jury_batch_reserved_usd", (("batch", batch_id),))] == 0
    assert seen[("jury_fleet_read_ok", ())] == 1
    assert seen[("jury_fleet_read_complete", ())] == 1
    assert seen[("jury_provider_batches", (("state", "open"),))] == 0


def test_a_store_it_cannot_read_is_served_as_not_read(redis_url: str, tmp_path: Path) -> None:
    """Redis answers but the store's tables are gone: no figure that is not true now, and
    `jury_fleet_read_ok 0` to alert on."""
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    broker = BrokerRedis.from_settings(settings)
    registry = fleet_registry(settings, broker)
    with get_engine(settings.database_url).begin() as connection:
        connection.execute(sqlalchemy.text(f"DROP TABLE {BatchRow.__tablename__}"))
    names = {family.name for family in registry.collect()}
    assert names == {"jury_fleet_read_ok"}
    assert registry.get_sample_value("jury_fleet_read_ok") == 0
    broker.close()
    assert redis.Redis.from_url(redis_url).ping()


def test_a_worker_whose_metrics_port_is_taken_stops_in_one_paragraph(
    redis_url: str, tmp_path: Path
) -> None:
    """Asked for metrics it cannot serve, a worker says why and stops at once, before it
    takes a task (or imports LiteLLM)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
        done = subprocess.run(
            [sys.executable, "-P", "-m", "jury.worker"],
            env=worker_env(settings, JURY_METRICS_PORT=str(port)),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 2
    assert f"jury worker: no free port for metrics in {port}" in done.stderr
    assert "Traceback" not in done.stderr
