"""The worker's Celery app, built from Settings when the worker starts (not at import)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from celery import Celery
from celery.platforms import EX_FAILURE
from celery.signals import (
    celeryd_after_setup,
    task_postrun,
    task_received,
    worker_process_init,
    worker_ready,
    worker_shutdown,
)
from celery.worker import state as worker_state

from jury.broker.redis_client import BrokerRedis, outage
from jury.broker.transport import worker_transport
from jury.errors import JuryError
from jury.settings import ENGINE_POOL, Settings
from jury.worker.engine.housekeeping import Housekeeper
from jury.worker.engine.liveness import HeldMessages
from jury.worker.engine.pool import EnginePool, open_files_for
from jury.worker.engine.queues import BrokerQueues
from jury.worker.engine.window import WindowLimits
from jury.worker.metrics.serving import serve_worker_metrics
from jury.worker.runtime import WorkerRuntime
from jury.worker.tasks import register_tasks

log = logging.getLogger("jury.worker")


def create_worker_app(settings: Settings) -> Celery:
    app = Celery("jury", set_as_current=True)
    app.conf.update(settings.celery_config())
    if transport := worker_transport(settings.broker_url):
        app.conf.broker_transport = transport
    # A message refused before any task runs (not JSON, no such task) is one log line.
    app.conf.worker_consumer = "jury.worker.engine.consumer:RefusingConsumer"
    lock = threading.Lock()
    holder: list[WorkerRuntime] = []

    def runtime() -> WorkerRuntime:
        # Built on first use inside the worker (after any fork), shared by its threads.
        with lock:
            if not holder:
                holder.append(_build_runtime(app, settings))
            return holder[0]

    def build_runtime(**_: object) -> None:
        try:
            runtime()
        except Exception as exc:
            # One line, and the worker stops (exit 1): without its runtime it can take no task.
            # Celery checks the flag as its consumer starts (celery/worker/state.py).
            log.error("jury worker cannot start: %s", " ".join(str(exc).split()))
            worker_state.should_stop = EX_FAILURE

    # Built before the worker takes a task or answers a ping: the build warms LiteLLM up and
    # freezes its heap (a full collection of some 300,000 objects: 0.9 s under
    # bench/ratelimit's CPU hog), which, built on first use, held up a batch's first calls.
    # Celery's `celeryd_after_setup` comes after its logging is set up and before its pool
    # and consumer start; a prefork pool's children build their own after the fork.
    if settings.worker_pool == "prefork":
        worker_process_init.connect(build_runtime, weak=False)
        worker_process_init.connect(_serve_child_metrics(settings), weak=False)
    else:
        celeryd_after_setup.connect(build_runtime, weak=False)
        # This process makes every call: its metrics are served from the start, and a port
        # that cannot be had stops the worker here, in one paragraph (ConfigurationError).
        serve_worker_metrics(settings)
    register_tasks(app, runtime)
    held = _ledger() if settings.worker_pool == ENGINE_POOL else None
    housekeeper = Housekeeper(runtime, held)

    def start_housekeeping(sender: Any = None, **_: object) -> None:
        # Celery sends worker_ready from its consumer (celery/apps/worker.py,
        # on_consumer_ready), whose pool is the engine's when jury's pool runs.
        housekeeper.start()
        pool = getattr(sender, "pool", None)
        if not isinstance(pool, EnginePool):
            return
        try:
            limits = WindowLimits.of(
                open_files_for(settings.worker_concurrency),
                settings.worker_window,
                settings.worker_memory_mb * 2**20,
            )
            adapter = pool.adapt_window(sender, limits, runtime().loop.loop)
        except Exception:  # the worker runs on at Celery's prefetch count, its ceiling
            log.exception("the window of tasks in flight cannot adapt")
            return
        if held is not None:
            held.window_report = adapter.report

    def stop_housekeeping(**_: object) -> None:
        # A warm shutdown ends in one line, whatever it meets (Redis gone, the store locked).
        try:
            housekeeper.stop()
            with lock:
                if holder:
                    holder[0].close()
        except Exception as exc:
            log.warning("stopping: %s", outage(exc) or f"{type(exc).__name__}: {exc}")

    worker_ready.connect(start_housekeeping, weak=False)
    worker_shutdown.connect(stop_housekeeping, weak=False)
    return app


def _serve_child_metrics(settings: Settings) -> Callable[..., None]:
    """A prefork child makes the calls: each serves its own metrics, on the first free port
    of JURY_METRICS_PORT's range. A child cannot stop the worker's start: it logs why."""

    def serve(**_: object) -> None:
        try:
            serve_worker_metrics(settings)
        except JuryError as exc:
            log.error("this worker process records no metrics: %s", exc)

    return serve


def _ledger() -> HeldMessages:
    """The engine's ledger of held delivery tags, kept by Celery's public signals: a message is
    held from its receipt until its task has run (the ack follows at once)."""
    held = HeldMessages()

    def received(request: Any = None, **_: object) -> None:
        if request is not None:
            held.received(request.id, str(request.message.delivery_tag))

    def ran(task_id: str | None = None, **_: object) -> None:
        if task_id is not None:
            held.done(task_id)

    task_received.connect(received, weak=False)
    task_postrun.connect(ran, weak=False)
    return held


def _build_runtime(app: Celery, settings: Settings) -> WorkerRuntime:
    broker = BrokerRedis.from_settings(settings)
    queues = BrokerQueues(app, settings, broker)
    return WorkerRuntime(settings, queues, broker=broker)
