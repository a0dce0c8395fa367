"""A host that loses its network: a worker in a network namespace of its own, joined by a veth
pair to the namespace where Redis and the simulator listen. Mid-batch its link is cut: once
its heartbeat is older than the timeout, the tasks it held are queued again and another worker
finishes the batch. Then the link comes back, the cut worker's calls end late and it stores
and acknowledges what it had: nothing changes (its samples are duplicates, its acks name
delivery tags that no longer exist).

Needs root and iproute2 (`ip netns`, veth), as on the project's machines and CI; only loopback
and namespaces of the test's own, with addresses of a private range that exist nowhere else.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from celery import Celery

from jury.batchfile.loading import load_batch
from jury.local.services import (
    ManagedProcess,
    python_module,
    start_embedded_redis,
    start_simulator,
    wait_for,
)
from jury.producer.publishing import create_producer_app
from jury.producer.submission import submit_batch
from jury.store.cells import iter_verdicts
from jury.store.engine import session_factory
from jury.store.repository import batch_status
from jury.store.samples import count_batch_samples
from tests.conftest import WorkerStarter, settings_for, stop_workers, worker_env
from tests.integration.test_faults import assert_exactly_once
from tests.integration.test_pipeline import write_batch

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class Link:
    namespace: str
    host_interface: str
    host_ip: str

    def set(self, up: bool) -> None:
        _ip("link", "set", self.host_interface, "up" if up else "down")


def _ip(*args: str, namespace: str | None = None) -> None:
    prefix = ["ip", "netns", "exec", namespace] if namespace else []
    subprocess.run([*prefix, "ip", *args], check=True, capture_output=True, timeout=10)


@pytest.fixture
def link() -> Iterator[Link]:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("network namespaces need root and iproute2")
    tag = secrets.token_hex(2)
    namespace, host_if, worker_if = f"jury-{tag}", f"jh{tag}", f"jw{tag}"
    octet = int(tag, 16) % 250 + 1
    host_ip, worker_ip = f"10.231.{octet}.1", f"10.231.{octet}.2"
    try:
        _ip("netns", "add", namespace)
        _ip("link", "add", host_if, "type", "veth", "peer", "name", worker_if)
        _ip("link", "set", worker_if, "netns", namespace)
        _ip("addr", "add", f"{host_ip}/30", "dev", host_if)
        _ip("link", "set", host_if, "up")
        _ip("addr", "add", f"{worker_ip}/30", "dev", worker_if, namespace=namespace)
        _ip("link", "set", worker_if, "up", namespace=namespace)
        _ip("link", "set", "lo", "up", namespace=namespace)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot make a network namespace here: {exc.stderr!r}")
    yield Link(namespace, host_if, host_ip)
    subprocess.run(["ip", "link", "del", host_if], capture_output=True, check=False)
    subprocess.run(["ip", "netns", "del", namespace], capture_output=True, check=False)


def test_a_cut_host_loses_nothing_and_its_late_results_change_nothing(
    tmp_path: Path, link: Link, start_workers: WorkerStarter
) -> None:
    redis_server = start_embedded_redis(tmp_path, host=link.host_ip)
    simulator = start_simulator(
        tmp_path, ["--host", link.host_ip, "--latency-ms", "1500", "--latency-sigma", "0"]
    )
    cut_worker: list[ManagedProcess] = []
    try:
        # The simulator's address is private: the egress policy allows it, as an operator would.
        allowed = f"{link.host_ip}:{simulator.url.rsplit(':', 1)[1].split('/')[0]}"
        settings = settings_for(redis_server.url, f"sqlite:///{tmp_path / 'jury.db'}").model_copy(
            update={"heartbeat_timeout_s": 4.0, "worker_concurrency": 6, "egress_allow": allowed}
        )
        node = f"cut-{secrets.token_hex(3)}@localhost"
        log = tmp_path / "cut-worker.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                ["ip", "netns", "exec", link.namespace, *python_module("jury.worker"), "-n", node],
                env=worker_env(settings),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        cut_worker.append(ManagedProcess("cut-worker", process, log))
        app = create_producer_app(settings)
        wait_for(lambda: bool(app.control.ping(destination=[node], timeout=0.5)), 60, "the worker")
        batch = write_batch(
            tmp_path, simulator, [{"model": "openai/balanced", "n": 2}], cache=False
        )
        sessions = session_factory(settings.database_url)
        source = load_batch(batch, egress=settings.egress_policy())
        batch_id = submit_batch(source, sessions, app)
        # The cut worker has stored its first samples and holds the next tasks.
        wait_for(lambda: count_batch_samples(sessions, batch_id) >= 2, 60, "first samples")
        link.set(up=False)
        [other] = start_workers(settings)  # another host, on this side of the cut
        wait_for(lambda: batch_status(sessions, batch_id).status.finished, 90, "the batch")
        # The cut worker's tasks came back through its silence (those its ledger listed, or
        # those it fetched just before the cut), not through kombu's hour.
        assert "queued again" in other.log_tail(500)
        before = [v.model_dump() for v in iter_verdicts(sessions, batch_id)]
        assert_exactly_once(settings, batch_id)

        link.set(up=True)
        # Its late calls end (answered or timed out) and are stored and acknowledged.
        wait_for(lambda: not _active(app, node), 90, "the cut worker's late tasks", poll=0.5)
        # (The whole log: its background threads may have logged the outage after.)
        assert "succeeded" in cut_worker[0].log_tail(1_000_000)
        assert [v.model_dump() for v in iter_verdicts(sessions, batch_id)] == before
        assert_exactly_once(settings, batch_id)
    finally:
        stop_workers(cut_worker)
        simulator.stop()
        redis_server.stop()


def _active(app: Celery, node: str) -> bool:
    """Whether the worker still runs tasks (or does not answer: cut off)."""
    replies = app.control.inspect(destination=[node], timeout=1).active()
    return bool(replies is None or replies.get(node))
