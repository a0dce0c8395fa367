"""The worker's Celery app, built from Settings when the worker starts (not at import)."""

from __future__ import annotations

import threading

from celery import Celery
from celery.signals import worker_ready, worker_shutdown

from schemas.settings import Settings
from schemas.tasks import JUDGE_TASK, SampleRef
from worker.runtime import WorkerRuntime
from worker.sweeper import SweeperThread
from worker.tasks import register_tasks


def create_worker_app(settings: Settings) -> Celery:
    app = Celery("jury", set_as_current=True)
    app.conf.update(settings.celery_config())
    lock = threading.Lock()
    holder: list[WorkerRuntime] = []

    def publish(tasks: list[tuple[SampleRef, str]]) -> None:
        for ref, queue in tasks:
            app.send_task(JUDGE_TASK, args=list(ref), queue=queue, ignore_result=True)

    def runtime() -> WorkerRuntime:
        # Built on first use inside the worker (after any fork), shared by its threads.
        with lock:
            if not holder:
                holder.append(WorkerRuntime(settings, publish=publish))
            return holder[0]

    register_tasks(app, runtime)
    sweeper = SweeperThread(settings, runtime)

    def start_sweeper(**_: object) -> None:
        sweeper.start()

    def stop_sweeper(**_: object) -> None:
        sweeper.stop()

    worker_ready.connect(start_sweeper, weak=False)
    worker_shutdown.connect(stop_sweeper, weak=False)
    return app
