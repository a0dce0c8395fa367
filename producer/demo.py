"""`jury demo`: the embedded default. Starts what is missing (Redis, the simulator, a worker),
runs examples/demo.yaml, prints the verdicts, and leaves every process it started stopped."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from rich.console import Console

from producer.following import follow_batch, print_verdicts
from producer.loading import load_batch
from producer.publishing import create_producer_app
from producer.services import (
    ManagedProcess,
    redis_answers,
    start_embedded_redis,
    start_simulator,
    start_worker,
)
from producer.submission import submit_batch
from schemas.errors import ConfigurationError
from schemas.settings import DEFAULT_BROKER_URL, Settings
from schemas.status import BatchState
from store.engine import session_factory

DEMO_FILE = Path(__file__).resolve().parent.parent / "examples" / "demo.yaml"
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


def run_demo(console: Console, batch_file: Path = DEMO_FILE) -> int:
    if not batch_file.exists():
        raise ConfigurationError(f"the demo batch {batch_file} is missing from this install")
    log_dir = Path(tempfile.mkdtemp(prefix="jury-demo-"))
    started: list[ManagedProcess] = []
    ok = False
    try:
        broker = _broker_url(started, log_dir, console)
        # A queue of our own, so that no other worker on a shared Redis takes the demo's tasks.
        settings = Settings.from_env().model_copy(
            update={"broker_url": broker, "queue": f"jury-demo-{os.getpid()}"}
        )
        simulator = start_simulator(log_dir, SIMULATOR_OPTIONS)
        started.append(simulator)
        console.print(f"simulator (judge personas) at {simulator.url}")
        os.environ["JURY_SIMULATOR_URL"] = simulator.url
        source = load_batch(batch_file)
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
        sessions = session_factory(settings.database_url)
        batch_id = submit_batch(source, sessions, app)
        console.print(f"submitted batch {batch_id} ({source.stats.count} items)")
        status = follow_batch(sessions, batch_id, console, timeout=DEMO_TIMEOUT_S)
        if status is None or status.status != BatchState.COMPLETED:
            console.print("[red]the demo batch did not complete[/]")
            return 1
        print_verdicts(sessions, batch_id, console)
        console.print(
            f"\nresults are stored in {settings.database_url}; see them again with\n"
            f"  jury results {batch_id} --format json",
            highlight=False,
        )
        ok = True
        return 0
    finally:
        for process in reversed(started):
            process.stop()
        if not ok:
            for process in started:
                tail = process.log_tail()
                if tail:
                    console.print(f"[dim]--- {process.name} log ---\n{tail}[/]", highlight=False)
        shutil.rmtree(log_dir, ignore_errors=True)
