"""`jury demo`: the embedded default. Starts what is missing (Redis, the simulator, a worker),
runs the demo batch (jury/examples/demo.yaml), prints the verdicts, and leaves every process it
started stopped."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from urllib.parse import urlsplit

from celery import Celery
from rich.console import Console

from jury.batchfile.loading import load_batch
from jury.errors import ConfigurationError
from jury.local.services import (
    ManagedProcess,
    redis_answers,
    start_embedded_redis,
    start_simulator,
    start_worker,
)
from jury.producer.following import follow_batch, print_verdicts
from jury.producer.publishing import create_producer_app
from jury.producer.submission import submit_batch
from jury.results.terminal import safe_text
from jury.schemas.status import BatchState
from jury.settings import DEFAULT_BROKER_URL, Settings
from jury.store.engine import session_factory
from jury.store.sql import Sessions

# Package data (pyproject.toml), so that `jury demo` works from an installed wheel too.
DEMO_FILE = Path(str(resources.files("jury") / "examples" / "demo.yaml"))
# The simulator's answers: ~150 ms each, reproducible scores.
SIMULATOR_OPTIONS = ["--seed", "21", "--latency-ms", "150", "--latency-sigma", "0.4"]
DEMO_TIMEOUT_S = 100


def _broker_url(started: list[ManagedProcess], log_dir: Path, console: Console) -> str:
    if os.environ.get("JURY_BROKER_URL"):
        return os.environ["JURY_BROKER_URL"]
    if redis_answers(DEFAULT_BROKER_URL):
        console.print(f"using the Redis that answers at {DEFAULT_BROKER_URL}")
        return DEFAULT_BROKER_URL
    redis_process = start_embedded_redis(log_dir)
    started.append(redis_process)
    console.print(f"no Redis running: started an embedded one at {redis_process.url}")
    return redis_process.url


@dataclass
class EmbeddedStack:
    """What `embedded_stack` started, and the settings that reach it."""

    settings: Settings
    app: Celery
    sessions: Sessions
    started: list[ManagedProcess]
    # Set by the caller when its work failed: the processes' logs are shown then.
    failed: bool = False


def with_egress_allowed(settings: Settings, url: str) -> Settings:
    """`settings` whose egress policy also lets calls reach `url`'s host and port (the
    simulator's, on loopback: the one address jury's defaults refuse that the demo needs)."""
    parts = urlsplit(url)
    allowed = f"{settings.egress_allow},{parts.hostname}:{parts.port}".lstrip(",")
    return settings.model_copy(update={"egress_allow": allowed})


@contextlib.contextmanager
def embedded_stack(
    console: Console, simulator: bool = True, database_url: str | None = None
) -> Iterator[EmbeddedStack]:
    """Redis (JURY_BROKER_URL's, the local one, or a private one), the simulator (setting
    JURY_SIMULATOR_URL, which the demo batch's judges name, and allowing its address in the
    stack's egress policy) and a worker on a queue of our own; every process it started is
    stopped on the way out, with its log shown on an error."""
    log_dir = Path(tempfile.mkdtemp(prefix="jury-demo-"))
    started: list[ManagedProcess] = []
    ok = False
    try:
        broker = _broker_url(started, log_dir, console)
        # A queue of our own, so that no other worker on a shared Redis takes our tasks.
        update: dict[str, str] = {"broker_url": broker, "queue": f"jury-demo-{os.getpid()}"}
        if database_url is not None:
            update["database_url"] = database_url
        settings = Settings.from_env().model_copy(update=update)
        if simulator:
            sim = start_simulator(log_dir, SIMULATOR_OPTIONS)
            started.append(sim)
            console.print(f"simulator (judge personas) at {sim.url}")
            os.environ["JURY_SIMULATOR_URL"] = sim.url
            settings = with_egress_allowed(settings, sim.url)
        app = create_producer_app(settings)
        env = {**os.environ, **settings.to_env()}
        node = f"jury-demo-{os.getpid()}@localhost"
        console.print("starting a worker…")
        started.append(
            start_worker(
                log_dir,
                env,
                node,
                ping=lambda name: bool(app.control.ping(destination=[name], timeout=0.5)),
            )
        )
        stack = EmbeddedStack(settings, app, session_factory(settings.database_url), started)
        yield stack
        ok = not stack.failed
    finally:
        for process in reversed(started):
            process.stop()
        if not ok:
            for process in started:
                tail = process.log_tail()
                if tail:
                    log = safe_text(f"--- {process.name} log ---\n{tail}", "dim", multiline=True)
                    console.print(log, highlight=False)
        shutil.rmtree(log_dir, ignore_errors=True)


def run_demo(console: Console, batch_file: Path = DEMO_FILE) -> int:
    if not batch_file.exists():
        raise ConfigurationError(f"the demo batch {batch_file} is missing from this install")
    with embedded_stack(console) as stack:
        source = load_batch(batch_file, egress=stack.settings.egress_policy())
        batch_id = submit_batch(source, stack.sessions, stack.app)
        console.print(f"submitted batch {batch_id} ({source.stats.count} items)")
        status = follow_batch(stack.sessions, batch_id, console, timeout=DEMO_TIMEOUT_S)
        if status is None or status.status != BatchState.COMPLETED:
            console.print("[red]the demo batch did not complete[/]")
            stack.failed = True
            return 1
        print_verdicts(stack.sessions, batch_id, console)
        console.print(
            f"\nresults are stored in {stack.settings.database_url}; see them again with\n"
            f"  jury results {batch_id} --format json",
            highlight=False,
        )
        return 0
