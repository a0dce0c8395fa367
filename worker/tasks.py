"""The Celery task: a thin adapter that turns JSON arguments into a WorkerRuntime call."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery import Celery, Task

from schemas.results import SampleResult
from schemas.tasks import JUDGE_TASK, SampleRef
from worker.gating import Deferred
from worker.modes import judge_in_mode, uses_modes
from worker.runtime import SampleNotStored, WorkerRuntime

log = logging.getLogger("jury.worker")
# A sample the store refused (the database is down or locked) is kept in the retried task's
# arguments and stored later, never judged twice: retried this often, backing off to a minute.
STORE_MAX_RETRIES = 30


def register_tasks(app: Celery, runtime: Callable[[], WorkerRuntime]) -> None:
    # ignore_result: the outcome lives in the store; Redis keeps no result per task.
    @app.task(name=JUDGE_TASK, bind=True, max_retries=None, ignore_result=True)
    def judge_sample(
        self: Task,
        batch_id: str,
        item_id: str,
        dimension: str,
        judge: str,
        sample: int,
        judged: dict[str, Any] | None = None,
    ) -> None:
        ref = SampleRef(batch_id, item_id, dimension, judge, int(sample))
        try:
            if uses_modes(runtime(), ref):  # a combined task, or any of a pairwise batch
                judge_in_mode(runtime(), ref, judged)
            else:
                known = SampleResult.model_validate(judged) if judged else None
                runtime().judge(ref, known)
        except Deferred as exc:
            # No rate-limit slot soon: come back when there is one, holding no thread. The
            # countdown stays far below the visibility timeout (which would redeliver it).
            limit = max(1.0, runtime().settings.visibility_timeout_s / 4)
            raise self.retry(countdown=min(exc.countdown_s, limit)) from exc
        except SampleNotStored as exc:
            retries = self.request.retries
            if retries >= STORE_MAX_RETRIES:
                raise
            log.warning("%s; retrying in %d s", exc, min(60, 2**retries))
            kwargs = {"judged": exc.payload}
            raise self.retry(exc=exc, kwargs=kwargs, countdown=min(60, 2**retries)) from exc
