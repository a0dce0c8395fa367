"""Publishing a batch: one chord per (item, dimension), one header task per (judge, sample).

The producer sends tasks by name; it never imports the worker (nor litellm).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable

import redis
from celery import Celery, chord

from schemas.batch import BatchConfig
from schemas.errors import ConfigurationError
from schemas.settings import Settings, lane_queue
from schemas.tasks import AGGREGATE_TASK, JUDGE_TASK, CellRef


def create_producer_app(settings: Settings) -> Celery:
    app = Celery("jury-producer", set_as_current=False)
    app.conf.update(settings.celery_config())
    # The producer never waits on a task's result, so it must not SUBSCRIBE to a result
    # channel per task sent (Celery's Redis backend does, by default: a million pubsub
    # subscriptions would be the producer's main cost), nor UNSUBSCRIBE when the discarded
    # AsyncResult is collected (which, at exit, may find Redis already stopped).
    app.backend.on_task_call = _ignore
    app.backend.remove_pending_result = _ignore
    return app


def _ignore(*_args: object) -> None:
    return None


def check_broker(settings: Settings) -> None:
    """Fail fast, with a clear message, when Redis does not answer."""
    try:
        client = redis.Redis.from_url(settings.broker_url, socket_connect_timeout=3)
        client.ping()
        client.close()
    except (redis.RedisError, ValueError) as exc:
        raise ConfigurationError(
            f"cannot reach Redis at {settings.broker_url} (JURY_BROKER_URL): {exc}. "
            "Start Redis, or point JURY_BROKER_URL at one."
        ) from None


def short_task_id() -> str:
    """96 random bits in 16 characters: a UUID's 36 would appear several times per message."""
    return secrets.token_urlsafe(12)


def judge_queues(app: Celery, config: BatchConfig) -> dict[str, str]:
    """Each judge's lane: judges of one panel never share a queue (up to `lanes` judges), so a
    slow or tightly limited model cannot hold up a fast one."""
    queue, lanes = app.conf.task_default_queue, int(app.conf.jury_lanes)
    return {judge.name: lane_queue(queue, n, lanes) for n, judge in enumerate(config.panel)}


def publish_cell(
    app: Celery, cell: CellRef, samples: Iterable[tuple[str, int]], queues: dict[str, str]
) -> int:
    """One chord: a judge task per (judge, sample index), then the aggregation callback."""
    # Arguments are positional and short: the message carries references, never item text.
    header = [
        app.signature(
            JUDGE_TASK, args=(*cell, judge, index), task_id=short_task_id(), queue=queues[judge]
        )
        for judge, index in samples
    ]
    body = app.signature(AGGREGATE_TASK, args=tuple(cell), task_id=short_task_id())
    chord(header, app=app)(body)
    return len(header)


def all_samples(config: BatchConfig) -> list[tuple[str, int]]:
    return [(j.name, index) for j in config.panel for index in range(j.n)]


def publish_cells(app: Celery, batch_id: str, config: BatchConfig, item_ids: Iterable[str]) -> int:
    """Publish every cell of the given items; returns the number of judge tasks sent."""
    samples, queues = all_samples(config), judge_queues(app, config)
    return sum(
        publish_cell(app, CellRef(batch_id, item_id, dimension.name), samples, queues)
        for item_id in item_ids
        for dimension in config.dimensions
    )
