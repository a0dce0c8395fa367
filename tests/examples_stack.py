"""The installation and the stack that the examples of README.md and docs/ run with
(tests/integration/test_examples.py, test_shell_examples.py).

JURY_EXAMPLES_BIN names the bin folder of the installation whose `jury` and python run the
examples (default: the checkout's .venv/bin). `make test-wheel` points it at a virtual
environment outside the repository holding the wheel: then the workers behind the examples are
that installation's `jury worker` too, and no example may import jury from the checkout."""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from jury.local.services import ManagedProcess, wait_for
from jury.producer.publishing import create_producer_app
from jury.settings import Settings
from tests.conftest import ROOT, TEST_EGRESS_ALLOW, TEST_KEY_HOSTS, stop_workers

EXAMPLES_BIN = Path(os.environ.get("JURY_EXAMPLES_BIN") or ROOT / ".venv" / "bin").absolute()
INSTALLED_ELSEWHERE = bool(os.environ.get("JURY_EXAMPLES_BIN"))


def example_env(settings: Settings | None = None) -> dict[str, str]:
    """The environment a user's shell would have: the installation's bin first on PATH, the
    JURY_* settings of the stack, nothing pointing Python at the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "JURY_SIMULATOR_URL")}
    env["PATH"] = f"{EXAMPLES_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(EXAMPLES_BIN.parent)
    return {**env, **(settings.to_env() if settings else {})}


def stack_settings(redis_url: str, database_url: str) -> Settings:
    """Settings for workers the examples start or use, on a queue of their own: what the
    tests' workers have (conftest.settings_for) less the tests' own heuristics module, which
    an installed jury cannot import."""
    return Settings(
        broker_url=redis_url,
        database_url=database_url,
        queue=f"jury-examples-{secrets.token_hex(4)}",
        retry_base_delay_s=0.05,
        retry_max_delay_s=0.2,
        sweep_interval_s=1.0,
        egress_allow=TEST_EGRESS_ALLOW,
        key_hosts=TEST_KEY_HOSTS,
    )


@contextmanager
def installed_worker(
    redis_url: str, simulator_url: str, logs_dir: Path, folder: Path
) -> Iterator[Settings]:
    """One `jury worker` of the installation, on a queue and a SQLite database of its own."""
    settings = stack_settings(redis_url, f"sqlite:///{folder / 'jury.db'}")
    node = f"jury-examples-{secrets.token_hex(4)}@localhost"
    env = {**example_env(settings), "JURY_SIMULATOR_URL": simulator_url}
    log = logs_dir / f"{node.split('@')[0]}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(EXAMPLES_BIN / "jury"), "worker", "-n", node],
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    worker = ManagedProcess(node, process, log)
    app = create_producer_app(settings)

    def ready() -> bool:
        assert worker.alive(), worker.log_tail()
        return bool(app.control.ping(destination=[node], timeout=0.5))

    try:
        wait_for(ready, 180, "the installed jury worker", poll=0.3)
        yield settings
    finally:
        stop_workers([worker])


def example_workers(request: pytest.FixtureRequest) -> Iterator[Settings]:
    """The workers behind the examples that need one running: the suite's shared ones, or,
    for an installation elsewhere, one `jury worker` of that installation. (Each test file's
    module-scoped fixture of this name yields from it.)"""
    if not INSTALLED_ELSEWHERE:
        yield request.getfixturevalue("sqlite_workers")
        return
    folder = request.getfixturevalue("tmp_path_factory").mktemp("installed-worker")
    simulator: ManagedProcess = request.getfixturevalue("simulator")
    logs_dir: Path = request.getfixturevalue("logs_dir")
    with installed_worker(
        request.getfixturevalue("redis_url"), simulator.url, logs_dir, folder
    ) as settings:
        yield settings
