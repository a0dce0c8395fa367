"""Followers ride through outages: `jury submit --wait` keeps following while PostgreSQL and
then Redis are unreachable for a while, says so in one line each, and ends with the batch's
true state and exit code. Real PostgreSQL and Redis, behind TCP proxies that the test cuts
(every connection reset, new ones refused), as a server restart does; the worker's database
goes through the same proxy, so it meets the outage too. Then the worker, its Redis gone, is
stopped: a warm shutdown that meets an error ends in one line per step."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from jury.local.services import ManagedProcess, wait_for
from jury.store.engine import session_factory
from jury.store.samples import count_batch_samples
from tests.conftest import WorkerStarter, settings_for, worker_env
from tests.integration.test_candidates import tag
from tests.integration.test_cli import JURY
from tests.integration.test_faults import assert_exactly_once
from tests.integration.test_modes import tagged, write_batch
from tests.tcp_proxy import CuttableProxy

pytestmark = pytest.mark.integration
# How long each outage lasts once the follower has said so (the test's input, not a wait
# for anything): the guarantee holds for ten minutes (producer.outages).
OUTAGE_S = 2.0
ITEMS = 30  # at rpm 150, some 12 s of judging: time for both outages


# The Redis outage's variant hung once in three full loaded runs of the suite: the follower
# had not ended 120 s after Redis came back (cause not found; alone it passed every time).
# It runs in `make test-slow`; `make test` keeps the database's outage.
@pytest.mark.parametrize("redis_outage", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_submit_wait_rides_through_a_database_and_a_redis_outage(
    tmp_path: Path,
    redis_url: str,
    postgres_url: str,
    simulator: ManagedProcess,
    start_workers: WorkerStarter,
    redis_outage: bool,
) -> None:
    database_proxy, database_url = CuttableProxy.before(postgres_url)
    redis_proxy, proxied_redis = CuttableProxy.before(redis_url)
    worker_redis, workers_redis_url = CuttableProxy.before(redis_url)
    try:
        # The worker reaches PostgreSQL through the proxy the follower uses (the same URL:
        # the same store, to the diagnosis), and Redis through one of its own, cut only at
        # the end, to stop the worker without Redis.
        settings = settings_for(workers_redis_url, database_url)
        (worker,) = start_workers(settings)
        mark = tag()
        batch_id, judge = f"outage-{mark}", tagged("balanced", f"outage{mark}")
        spec = {
            "judges": [{"model": judge, "n": 1, "rpm": 150}],
            "dimensions": ["relevance"],
            "items": [{"id": f"q{i}", "output": f"answer {i}"} for i in range(ITEMS)],
        }
        batch = write_batch(tmp_path, simulator, spec)
        follower_env = worker_env(settings_for(proxied_redis, database_url, settings.queue))
        stderr = tmp_path / "stderr.txt"
        with stderr.open("w") as errors:
            follower = subprocess.Popen(
                [*JURY, "submit", str(batch), "--wait", "--batch-id", batch_id],
                env=follower_env,
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
                cwd=tmp_path,
            )
        try:
            direct = session_factory(postgres_url)  # the test's own look, around the proxy

            def stored() -> int:
                return count_batch_samples(direct, batch_id)

            def said(words: str) -> bool:
                if follower.poll() is not None:
                    raise AssertionError(f"the follower ended early:\n{stderr.read_text()}")
                return words in stderr.read_text()

            wait_for(lambda: stored() >= 3, 60, "the first judgments")
            database_proxy.down()
            wait_for(lambda: said("database unreachable since"), 20, "the follower to say so")
            time.sleep(OUTAGE_S)
            database_proxy.up()
            wait_for(lambda: stored() >= ITEMS // 2, 60, "judging to go on")
            if redis_outage:
                redis_proxy.down()
                wait_for(lambda: said("Redis unreachable since"), 30, "the follower to say so")
                time.sleep(OUTAGE_S)
                redis_proxy.up()
            out, _ = follower.communicate(timeout=120)
        finally:
            if follower.poll() is None:
                follower.kill()
        errors_text = stderr.read_text()
        assert follower.returncode == 0, out + errors_text
        assert out.strip().splitlines()[-1] == batch_id
        assert f"{ITEMS}/{ITEMS} judgments" in out
        assert errors_text.count("database unreachable since") == 1, errors_text
        # One line per outage at most. Without a Redis outage the line may still come: while
        # the database is cut, the workers' answer to the follower's probe can come later
        # than its bound, which the follower reads as a broker that does not answer.
        redis_lines = errors_text.count("Redis unreachable since")
        assert redis_lines == 1 if redis_outage else redis_lines <= 1, errors_text
        assert "Traceback" not in errors_text + out
        assert_exactly_once(settings_for(redis_url, postgres_url), batch_id)

        # A warm shutdown that meets an error (Redis gone) says so in one line per step.
        worker_redis.down()
        assert worker.log_path is not None
        log_path = worker.log_path
        wait_for(lambda: "Redis unreachable" in log_path.read_text(), 30, "the worker to notice")
        worker.process.terminate()
        assert worker.process.wait(30) == 0
        stopping = log_path.read_text().partition("Warm shutdown")[2]
        assert "could not remove this worker's heartbeat: Redis unreachable" in stopping
        assert "Traceback" not in stopping
    finally:
        for proxy in (database_proxy, redis_proxy, worker_redis):
            proxy.close()
