"""`python -m jury.worker [celery worker options]`: what `jury worker` runs."""

from __future__ import annotations

import logging
import os
import sys

from jury._version import version_line
from jury.errors import EXIT_INTERRUPTED, JuryError, ctrl_c_ends_quietly
from jury.settings import ENGINE_POOL, Settings

# How long a thread keeps the GIL before another that waits for it may take it. A worker's
# event loop does nearly all of its work; the consumer, store and completion threads wait on
# sockets most of the time. Python's 5 ms default made them take the GIL from the loop so
# often that a judgment cost about 10 % more CPU (bench/throughput, 8,000 judgments: 8.4 ms
# at 5 ms, 8.0 at 20 ms, 7.7 at 50 ms, on a loaded 2-core machine).
SWITCH_INTERVAL_S = 0.05


def main(argv: list[str]) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        settings = Settings.from_env()
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
    pool = settings.worker_pool
    if pool == ENGINE_POOL:
        # Celery's documented hook for a pool of one's own (celery/concurrency/__init__.py),
        # read when celery.concurrency is first imported: before the app is built.
        os.environ["CELERY_CUSTOM_WORKER_POOL"] = "jury.worker.engine.pool:EnginePool"
        pool = "custom"
    from jury.worker.app import create_worker_app

    try:
        app = create_worker_app(settings)
    except JuryError as exc:
        print(f"jury worker: {exc}", file=sys.stderr)
        return 2
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
        app.worker_main(defaults + argv)  # options given later override the defaults
    finally:  # stopped: a Ctrl-C during LiteLLM's exit callbacks ends it without a traceback
        ctrl_c_ends_quietly()
    return 0


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except KeyboardInterrupt:  # Ctrl-C while it starts (importing LiteLLM takes seconds)
        ctrl_c_ends_quietly()
        code = EXIT_INTERRUPTED
    sys.exit(code)
