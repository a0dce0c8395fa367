"""Celery tasks: thin adapters that turn JSON arguments into calls on the WorkerRuntime."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery import Celery, Task
from sqlalchemy.exc import DBAPIError

from schemas.tasks import AGGREGATE_TASK, JUDGE_TASK, CellRef, SampleRef
from worker.gating import Deferred
from worker.runtime import CellIncomplete, WorkerRuntime

log = logging.getLogger("jury.worker")
# An early callback (a duplicate delivery fired the chord) waits for the missing samples this
# often, this many times; after that the sweeper finalizes the cell when they arrive. The
# countdown stays far below the visibility timeout, which would otherwise redeliver it.
INCOMPLETE_RETRY_S = 5
INCOMPLETE_MAX_RETRIES = 60
STORE_MAX_RETRIES = 20


def register_tasks(app: Celery, runtime: Callable[[], WorkerRuntime]) -> None:
    @app.task(name=JUDGE_TASK, bind=True, max_retries=None)
    def judge_sample(
        self: Task, batch_id: str, item_id: str, dimension: str, judge: str, sample: int
    ) -> dict[str, Any]:
        ref = SampleRef(batch_id, item_id, dimension, judge, int(sample))
        try:
            result = runtime().judge(ref)
        except Deferred as exc:
            # No rate-limit slot soon: come back when there is one, holding no thread. The
            # countdown stays far below the visibility timeout (which would redeliver it).
            limit = max(1.0, runtime().settings.visibility_timeout_s / 4)
            raise self.retry(countdown=min(exc.countdown_s, limit)) from exc
        return result.model_dump(mode="json", exclude_defaults=True)

    @app.task(name=AGGREGATE_TASK, bind=True, ignore_result=True, max_retries=None)
    def aggregate_cell(
        self: Task, results: list[Any], batch_id: str, item_id: str, dimension: str
    ) -> None:
        cell = CellRef(batch_id, item_id, dimension)
        try:
            runtime().aggregate(cell, results)
        except CellIncomplete as exc:
            if self.request.retries >= INCOMPLETE_MAX_RETRIES:
                log.warning("%s; leaving it to the sweeper", exc)
                return
            raise self.retry(countdown=INCOMPLETE_RETRY_S) from exc
        except DBAPIError as exc:
            if self.request.retries >= STORE_MAX_RETRIES:
                raise
            raise self.retry(exc=exc, countdown=min(60, 2**self.request.retries)) from exc
