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
from kombu import Exchange, Queue
from rich.console import Console

from jury.batchfile.loading import load_batch
from jury.broker import keys as redis_keys
from jury.broker.redis_client import BrokerRedis
from jury.errors import EXIT_INTERRUPTED, ConfigurationError
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
SIMULATOR_URL = "JURY_SIMULATOR_URL"


def _broker_url(
    settings: Settings, started: list[ManagedProcess], log_dir: Path, console: Console
) -> str:
    if "broker_url" in settings.model_fields_set:  # JURY_BROKER_URL, or the caller's own
        return settings.broker_url
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
    console: Console,
    simulator: bool = True,
    database_url: str | None = None,
    base: Settings | None = None,
) -> Iterator[EmbeddedStack]:
    """Redis (the broker `base` names, JURY_BROKER_URL's by default, else the local one, else
    a private one), the simulator and a worker on a queue of our own; every process it
    started is stopped on the way out, with its log shown on an error. The simulator's URL is
    JURY_SIMULATOR_URL, which the demo batch's judges name, while the stack runs, and its
    address is allowed in the stack's egress policy."""
    log_dir = Path(tempfile.mkdtemp(prefix="jury-demo-"))
    started: list[ManagedProcess] = []
    show_logs = True  # unless the work went well, or the user stopped it
    private: Settings | None = None  # the settings of our own queues, once they are named
    previous_simulator = os.environ.get(SIMULATOR_URL)
    base = base or Settings.from_env()
    try:
        broker = _broker_url(base, started, log_dir, console)
        # A queue of our own, so that no other worker on a shared Redis takes our tasks.
        update: dict[str, str] = {"broker_url": broker, "queue": f"jury-demo-{os.getpid()}"}
        if database_url is not None:
            update["database_url"] = database_url
        settings = private = base.model_copy(update=update)
        if simulator:
            # Its Batch API's files in our folder, removed with it (else a temporary folder
            # of the simulator's own would outlive every run).
            batches = ["--batch-dir", str(log_dir / "simulator-batches")]
            sim = start_simulator(log_dir, [*SIMULATOR_OPTIONS, *batches])
            started.append(sim)
            console.print(f"simulator (judge personas) at {sim.url}")
            # Read by the producer's validation of `${JURY_SIMULATOR_URL}`, and by the worker.
            os.environ[SIMULATOR_URL] = sim.url
            settings = private = with_egress_allowed(settings, sim.url)
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
        show_logs = stack.failed
    except KeyboardInterrupt:
        show_logs = False  # Ctrl-C: nothing failed, and the logs would bury the answer
        raise
    finally:
        if simulator:  # the caller's environment as it was
            if previous_simulator is None:
                os.environ.pop(SIMULATOR_URL, None)
            else:
                os.environ[SIMULATOR_URL] = previous_simulator
        for process in reversed(started):
            process.stop()
        if private is not None and not any(p.name == "redis" for p in started):
            # A shared Redis keeps nothing of ours: our queues were for this run only.
            with contextlib.suppress(Exception):  # a Redis gone away has nothing to forget
                forget_queues(private)
        if show_logs:
            for process in started:
                tail = process.log_tail()
                if tail:
                    log = safe_text(f"--- {process.name} log ---\n{tail}", "dim", multiline=True)
                    console.print(log, highlight=False)
        shutil.rmtree(log_dir, ignore_errors=True)


def forget_queues(settings: Settings) -> None:
    """Delete the deployment's queues (settings.queue and its lanes) from the broker, with
    the binding tables kombu keeps for each (`_kombu.binding.<queue>` and, since kombu 5.7,
    `_kombu.binding_permanent.<queue>`): 18 keys a run of the demo otherwise left behind;
    and the deployment's own keys (jury.broker.keys).

    Through kombu's own calls: a queue declared on a channel, then deleted, leaves neither
    its lists nor its bindings (kombu.transport.redis.Channel._queue_bind adds the member to
    both tables; _delete removes it from both and deletes the lists, and Redis drops a set
    with no member left). Only for queues nobody else consumes: their messages go too."""
    app = create_producer_app(settings)
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        for name in settings.all_queues:
            queue = Queue(name, Exchange(name, type="direct"), routing_key=name)
            bound = queue.bind(channel)
            bound.declare()
            bound.delete()
    # And the deployment's own keys: its batch's mark, budget meter, workers' heartbeats.
    broker = BrokerRedis.from_settings(settings)
    try:
        pattern = broker.key(redis_keys.deployment_pattern(settings.queue))
        for key in broker.client.scan_iter(match=pattern, count=1000):
            broker.client.delete(key)
    finally:
        broker.close()


def run_demo(console: Console, batch_file: Path = DEMO_FILE) -> int:
    if not batch_file.exists():
        raise ConfigurationError(f"the demo batch {batch_file} is missing from this install")
    try:
        return _demo(console, batch_file)
    except KeyboardInterrupt:
        console.print("demo interrupted: every process it started is stopped", highlight=False)
        return EXIT_INTERRUPTED


def _demo(console: Console, batch_file: Path) -> int:
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
