"""`python -m jury.worker [--processes N] [celery worker options]`: what `jury worker` runs.

One worker process by default; with `--processes N` (JURY_WORKER_PROCESSES; 0: one per core)
a parent loads the worker's code once and forks N of them (jury.worker.supervisor)."""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING

from jury._version import version_line
from jury.errors import EXIT_INTERRUPTED, JuryError, ctrl_c_ends_quietly
from jury.settings import ENGINE_POOL, Settings
from jury.worker.supervisor import (
    child_node_name,
    die_with_supervisor,
    fork_workers,
    preload,
    processes_wanted,
    take_processes_option,
)

if TYPE_CHECKING:
    from celery import Celery

# How long a thread keeps the GIL before another that waits for it may take it. A worker's
# event loop does nearly all of its work; the consumer, store and completion threads wait on
# sockets most of the time. Python's 5 ms default made them take the GIL from the loop so
# often that a judgment cost about 10 % more CPU (bench/throughput, 8,000 judgments: 8.4 ms
# at 5 ms, 8.0 at 20 ms, 7.7 at 50 ms, on a loaded 2-core machine).
SWITCH_INTERVAL_S = 0.05


def main(argv: list[str]) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    die_with_supervisor()
    processes_option, argv = take_processes_option(argv)
    try:
        settings = Settings.from_env()
        if processes_option is not None:
            settings = Settings.model_validate(
                {**settings.model_dump(), "worker_processes": processes_option}
            )
    except Exception as exc:
        print(f"jury worker: bad configuration: {exc}", file=sys.stderr)
        return 2
    from jury.worker.startup import (
        EXIT_BAD_BROKER,
        EXIT_NO_BROKER,
        check_broker_kind,
        wait_for_broker,
    )

    if problem := check_broker_kind(settings):
        print(f"jury worker: {problem}", file=sys.stderr)
        return EXIT_BAD_BROKER
    if gave_up := wait_for_broker(settings, lambda line: _say(f"jury worker: {line}")):
        print(f"jury worker: {gave_up}", file=sys.stderr)
        return EXIT_NO_BROKER
    if settings.worker_pool == ENGINE_POOL:
        # Celery's documented hook for a pool of one's own (celery/concurrency/__init__.py),
        # read when celery.concurrency is first imported: before the app is built.
        os.environ["CELERY_CUSTOM_WORKER_POOL"] = "jury.worker.engine.pool:EnginePool"
    processes = processes_wanted(settings.worker_processes)
    if processes == 1:
        return run_worker(settings, argv)
    try:
        frozen = preload()
    except JuryError as exc:
        print(f"jury worker: {exc}", file=sys.stderr)
        return 2
    _say(
        f"jury worker: {version_line()}; {processes} worker processes forked from pid "
        f"{os.getpid()}, which loaded their code once ({frozen} objects shared)"
    )
    return fork_workers(
        processes,
        lambda index: run_worker(settings, child_node_name(argv, index), supervised=True),
        argv,
    )


def run_worker(settings: Settings, argv: list[str], supervised: bool = False) -> int:
    """One worker process: Celery's worker with jury's app, until it stops."""
    pool = "custom" if settings.worker_pool == ENGINE_POOL else settings.worker_pool
    from jury.worker.app import create_worker_app

    try:
        app = create_worker_app(settings)
    except JuryError as exc:
        print(f"jury worker: {exc}", file=sys.stderr)
        return 2
    if not supervised:
        print(f"jury worker: {version_line()}", file=sys.stderr, flush=True)
    # One log line per task, not two: Celery's "received" lines say nothing its "succeeded" or
    # "raised" lines do not, and at hundreds of tasks a second each line costs.
    logging.getLogger("celery.worker.strategy").setLevel(logging.WARNING)
    # Load litellm before taking tasks, so the first judgments do not pay for the import.
    try:
        import jury.worker.calls.llm_client  # noqa: F401
    except JuryError as exc:
        print(f"jury worker: {exc}", file=sys.stderr)
        return 2
    defaults = [
        "worker",
        # Distinct names for workers started plainly on one host (Celery's default, celery@host,
        # would make two of them one worker to Flower and to remote control).
        f"--hostname=jury-{os.getpid()}@%h",
        f"--pool={pool}",
        f"--concurrency={settings.pool_size}",
        f"--queues={','.join(settings.all_queues)}",
        "--loglevel=INFO",
        "--without-gossip",
        "--without-mingle",
    ]
    try:
        # Options given later override the defaults.
        status = _worker_status(app, defaults + argv)
        if supervised:
            return status
    finally:  # stopped: a Ctrl-C during LiteLLM's exit callbacks ends it without a traceback
        ctrl_c_ends_quietly()
    return 0


def _worker_status(app: Celery, argv: list[str]) -> int:
    """Run the worker as `app.worker_main` does, keeping its exit status, which tells a
    supervisor whether it failed. `app.start` (celery/app/base.py) runs Celery's click command
    with `standalone_mode=False` and drops what it returns: click returns the status given to
    `ctx.exit` (celery/bin/worker.py ends with `ctx.exit(worker.exitcode)`) in that mode."""
    from celery.bin.celery import celery as celery_command

    celery_command.params[0].default = app
    try:  # its usage line names the command users type, not `python -m jury.worker`
        status = celery_command.main(args=argv, prog_name="jury", standalone_mode=False)
    finally:
        celery_command.params[0].default = None
    return status if isinstance(status, int) else 0


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except KeyboardInterrupt:  # Ctrl-C while it starts (importing LiteLLM takes seconds)
        ctrl_c_ends_quietly()
        code = EXIT_INTERRUPTED
    sys.exit(code)
