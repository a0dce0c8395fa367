"""`celery -A jury.worker worker …`: the worker's Celery app, for Celery's own command line.

Celery's `-A jury.worker` finds this module (a package's `celery` module) and its `app`, built
here from the JURY_* environment when Celery imports it. `jury worker` is the usual way to run
a worker: it also picks jury's engine pool and this deployment's queues, which with Celery's
command line are given by hand:

    CELERY_CUSTOM_WORKER_POOL=jury.worker.engine.pool:EnginePool \\
        celery -A jury.worker worker --pool custom --queues jury,jury.lane0,…,jury.lane7
"""

from __future__ import annotations

from jury.settings import Settings
from jury.worker.app import create_worker_app

app = create_worker_app(Settings.from_env())
