"""Real services for the tests: Redis (the machine's, on a database of our own, or an embedded
one), PostgreSQL (a fresh database per run), the simulator, and `python -m worker` processes."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import cast
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
import sqlalchemy

from jury.local.services import (
    ManagedProcess,
    redis_answers,
    start_embedded_redis,
    start_simulator,
    start_worker,
    wait_for,
)
from jury.producer.publishing import create_producer_app
from jury.settings import Settings
from jury.store.engine import dispose_all
from jury.worker.limits.ratelimit import MemoryRateLimiter, RateLimiter
from jury.worker.limits.redis_limiter import RedisRateLimiter
from jury.worker.supervisor import child_node_name

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# Rich sizes its tables to the terminal; a test reads them whole, whatever runs it (a
# terminal, CI's pipe, a pytest-xdist process): every `jury` the tests start sees 160 columns.
os.environ.setdefault("COLUMNS", "160")
# The simulator and the tests' own servers listen on loopback, which the workers' egress
# policy refuses by default: the tests allow it as docs/limits-and-security.md tells a
# developer to, in their own process (`jury submit` checks a batch with it) and in the
# workers' settings (settings_for). A test of the policy itself sets its own.
TEST_EGRESS_ALLOW = "loopback"
# The keys the tests plant, allowed to go to their servers on loopback (and nowhere else).
TEST_KEY_HOSTS = {name: ["loopback"] for name in ("JURY_TEST_KEY", "JURY_TEST_PLANTED_KEY")}
os.environ.setdefault("JURY_EGRESS_ALLOW", TEST_EGRESS_ALLOW)
os.environ.setdefault("JURY_KEY_HOSTS", json.dumps(TEST_KEY_HOSTS))
ROOT = Path(__file__).resolve().parent.parent
# A Redis database number of our own on a shared server; flushed before and after the run.
# Each pytest-xdist worker (gw0, gw1, …) takes the next number, so none flushes another's.
_XDIST_INDEX = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
DEFAULT_TEST_REDIS_DB = 11


def shared_redis_url(environ: Mapping[str, str], xdist_index: int = 0) -> str:
    """The Redis the tests use and flush: JURY_TEST_REDIS_URL (host, port, password, database:
    `redis://host:6380/5`) or the machine's 127.0.0.1:6379; database JURY_TEST_REDIS_DB
    when the URL names none (default 11), plus the pytest-xdist worker's index."""
    url = environ.get("JURY_TEST_REDIS_URL") or "redis://127.0.0.1:6379"
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss") or parts.query or parts.fragment:
        raise ValueError(f"JURY_TEST_REDIS_URL must read redis://host:port/db, not {url!r}")
    named = parts.path.strip("/")
    if named and not named.isdigit():
        raise ValueError(f"JURY_TEST_REDIS_URL's database must be a number, not {named!r}")
    first = int(named) if named else int(environ.get("JURY_TEST_REDIS_DB", DEFAULT_TEST_REDIS_DB))
    return urlunsplit((parts.scheme, parts.netloc, f"/{first + xdist_index}", "", ""))


TEST_REDIS_URL = shared_redis_url(os.environ, _XDIST_INDEX)
PG_ADMIN_URL = os.environ.get(
    "JURY_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
# Personas the tests use; `balanced@broken` answers 503 to everything.
SIMULATOR_SEED = 11
SIMULATOR_OPTIONS = ["--seed", str(SIMULATOR_SEED), "--down", "balanced@broken"]
IN_CI = os.environ.get("CI", "").lower() == "true"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `slow` run only with JURY_TEST_SLOW=1 (`make test-slow`): variants that
    cover an option rather than the default path, kept out of `make test` for its time."""
    if os.environ.get("JURY_TEST_SLOW"):
        return
    skip = pytest.mark.skip(reason="slow: JURY_TEST_SLOW=1 (make test-slow) runs it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def logs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("logs")


@pytest.fixture(scope="session")
def redis_url(logs_dir: Path) -> Iterator[str]:
    """The shared test Redis database (TEST_REDIS_URL), flushed before and after the run; where
    none answers, an embedded one of our own. A JURY_TEST_REDIS_URL that does not answer fails
    the run rather than be passed over."""
    shared = TEST_REDIS_URL
    if os.environ.get("JURY_TEST_REDIS_URL") and not redis_answers(shared):
        pytest.fail(f"JURY_TEST_REDIS_URL: no Redis answers at {shared} (database in range?)")
    if redis_answers(shared):
        client = redis.Redis.from_url(shared)
        client.flushdb()
        yield shared
        client.flushdb()
        client.close()
        return
    embedded = start_embedded_redis(logs_dir)
    yield embedded.url
    embedded.stop()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh database on the local PostgreSQL; skipped where none answers, except in CI."""
    try:
        admin = sqlalchemy.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            name = f"jury_test_{secrets.token_hex(4)}"
            connection.exec_driver_sql(f"CREATE DATABASE {name}")
    except Exception as exc:
        if IN_CI:
            pytest.fail(f"PostgreSQL is required in CI but {PG_ADMIN_URL} failed: {exc}")
        pytest.skip(f"no PostgreSQL at {PG_ADMIN_URL}: {exc}")
    yield PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    dispose_all()
    with admin.connect() as connection:
        connection.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    admin.dispose()


@pytest.fixture(scope="session")
def simulator(logs_dir: Path) -> Iterator[ManagedProcess]:
    process = start_simulator(logs_dir, SIMULATOR_OPTIONS)
    yield process
    process.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'jury.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


def settings_for(redis_url: str, database_url: str, queue: str | None = None) -> Settings:
    return Settings(
        broker_url=redis_url,
        database_url=database_url,
        queue=queue or f"jury-test-{secrets.token_hex(4)}",
        retry_base_delay_s=0.05,
        retry_max_delay_s=0.2,
        worker_concurrency=8,
        sweep_interval_s=1.0,
        restore_interval_s=1,
        restore_lock_timeout_s=3,
        # Callable heuristics from the tests' own functions (tests/heuristic_functions.py)
        heuristic_callables=["tests.heuristic_functions"],
        egress_allow=TEST_EGRESS_ALLOW,
        key_hosts=TEST_KEY_HOSTS,
    )


def worker_env(settings: Settings, **extra: str) -> dict[str, str]:
    return {**os.environ, **settings.to_env(), "PYTHONPATH": str(ROOT), **extra}


WorkerStarter = Callable[..., list[ManagedProcess]]


def launch_workers(
    logs_dir: Path, settings: Settings, count: int = 1, **extra_env: str
) -> list[ManagedProcess]:
    """Start `count` real `python -m worker` processes at once; wait until all answer a ping."""
    return _launch(logs_dir, settings, count, False, extra_env)


def launch_forked_workers(
    logs_dir: Path, settings: Settings, count: int, **extra_env: str
) -> list[ManagedProcess]:
    """`count` workers as `jury worker --processes count` starts them: forked from one process
    that imported their code once (jury.worker.supervisor), which is the one process returned;
    for workers a test never stops or kills one by one. A worker's code (LiteLLM, Celery)
    costs seconds of CPU to import: forked, `count` workers pay it once."""
    return _launch(logs_dir, settings, count, True, extra_env)


def _launch(
    logs_dir: Path, settings: Settings, count: int, forked: bool, extra_env: dict[str, str]
) -> list[ManagedProcess]:
    app = create_producer_app(settings)
    env = worker_env(settings, **extra_env)
    if forked and count > 1:
        parent = f"jury-test-{secrets.token_hex(4)}@localhost"
        # Its workers are named by the supervisor's own rule, numbered from 1.
        nodes = [child_node_name(["-n", parent], index)[1] for index in range(1, count + 1)]
        processes = [start_worker(logs_dir, env, parent, ["--processes", str(count)])]
    else:
        nodes = [f"jury-test-{secrets.token_hex(4)}@localhost" for _ in range(count)]
        processes = [start_worker(logs_dir, env, node) for node in nodes]

    def ready() -> bool:
        if not all(p.alive() for p in processes):
            raise AssertionError("a worker died:\n" + "\n".join(p.log_tail() for p in processes))
        return len(app.control.ping(destination=nodes, timeout=0.5)) == count

    try:
        # A worker start costs ~7 s of CPU (LiteLLM's import alone ~5 s): on a loaded 2-core
        # machine, several starting at once take well over a minute.
        wait_for(ready, 180, f"{count} workers", poll=0.2)
    except BaseException:
        stop_workers(processes)
        raise
    return processes


def stop_workers(processes: list[ManagedProcess], grace_s: float = 10.0) -> None:
    # SIGTERM them all (a warm shutdown), SIGKILL stragglers once `grace_s` has passed. One
    # SIGTERM each: a second one during the warm shutdown ends the worker with -15.
    for process in processes:
        if process.alive():
            process.process.terminate()
    deadline = time.monotonic() + grace_s
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.process.wait(max(0.0, deadline - time.monotonic()))
        process.stop(grace=0)
        if process.process.returncode not in (0, -15, -9):
            sys.stderr.write(f"--- {process.name} log ---\n{process.log_tail(60)}\n")


@pytest.fixture
def start_workers(logs_dir: Path) -> Iterator[WorkerStarter]:
    """Start workers with Settings of the test's own; all are stopped at teardown."""
    started: list[ManagedProcess] = []

    def start(
        settings: Settings, count: int = 1, *, forked: bool = False, **extra_env: str
    ) -> list[ManagedProcess]:
        launch = launch_forked_workers if forked else launch_workers
        processes = launch(logs_dir, settings, count, **extra_env)
        started.extend(processes)
        return processes

    yield start
    stop_workers(started)


@pytest.fixture(scope="session")
def sqlite_workers(
    redis_url: str,
    logs_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
    simulator: ManagedProcess,
) -> Iterator[Settings]:
    """Two workers on one SQLite database, shared by the tests that need nothing special.
    JURY_SIMULATOR_URL names the shared simulator, for batches (`jury init`'s starter) whose
    api_base is that placeholder: a worker start costs seconds of CPU, so tests share these."""
    folder = tmp_path_factory.mktemp("shared-sqlite")
    settings = settings_for(redis_url, f"sqlite:///{folder / 'jury.db'}")
    processes = launch_forked_workers(logs_dir, settings, 2, JURY_SIMULATOR_URL=simulator.url)
    yield settings
    stop_workers(processes)


@pytest.fixture(scope="session")
def postgresql_workers(redis_url: str, logs_dir: Path, postgres_url: str) -> Iterator[Settings]:
    settings = settings_for(redis_url, postgres_url)
    processes = launch_forked_workers(logs_dir, settings, 2)
    yield settings
    stop_workers(processes)


@pytest.fixture(params=["sqlite", "postgresql"])
def running_workers(request: pytest.FixtureRequest) -> Settings:
    """Shared workers on SQLite, then on PostgreSQL."""
    settings: Settings = request.getfixturevalue(f"{request.param}_workers")
    return settings


def queued_messages(settings: Settings, *, drain: bool = False) -> list[bytes]:
    """Every message waiting in the deployment's queues (the base queue and its lanes)."""
    client = redis.Redis.from_url(settings.broker_url)
    try:
        # the client does not decode responses: the messages are bytes
        messages = [cast(bytes, m) for q in settings.all_queues for m in client.lrange(q, 0, -1)]
        if drain:
            client.delete(*settings.all_queues)
        return messages
    finally:
        client.close()


def queue_idle(settings: Settings) -> bool:
    """Nothing queued for the deployment and nothing of its delivered but unacknowledged.
    kombu's `unacked` hash is the whole Redis database's: another test's deployment, whose
    workers were killed and are gone, may leave entries there that no reaper of ours will
    ever give back (each gives back only its own deployment's)."""
    if queued_messages(settings):
        return False
    client = redis.Redis.from_url(settings.broker_url)
    try:
        ours = set(settings.all_queues)
        for raw in cast(list[bytes], client.hvals("unacked")):
            try:
                routing = json.loads(raw)[2]
            except (ValueError, IndexError, TypeError):
                continue
            if routing in ours:
                return False
        return True
    finally:
        client.close()


class FakeClock:
    """A clock that moves only when a test moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# The rate limiters' horizon in their tests (tests/integration/test_ratelimit.py,
# tests/integration/test_send_gate.py).
LIMITER_HORIZON_S = 2.5


@pytest.fixture
def redis_limiter(redis_url: str) -> Iterator[RedisRateLimiter]:
    """The Redis rate limiter under a prefix of its own, its keys deleted afterwards."""
    client = redis.Redis.from_url(redis_url)
    prefix = f"jury:rl-test:{secrets.token_hex(4)}:"
    yield RedisRateLimiter(client, LIMITER_HORIZON_S, prefix=prefix)
    for key in client.scan_iter(f"{prefix}*"):
        client.delete(key)
    client.close()


@pytest.fixture(params=["memory", "redis"])
def limiter(request: pytest.FixtureRequest) -> RateLimiter:
    """Both rate limiters behind one interface: in memory on a FakeClock, and in Redis."""
    if request.param == "memory":
        return MemoryRateLimiter(LIMITER_HORIZON_S, clock=FakeClock())
    redis_one: RedisRateLimiter = request.getfixturevalue("redis_limiter")
    return redis_one
