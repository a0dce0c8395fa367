"""Publishing judge tasks: one per (item, dimension, judge, sample), in waves, with
back-pressure.

There is no chord: a judge task stores its sample and, when it finds its cell complete in the
store, builds the verdict itself (see worker.runtime). So a message is one small task, Redis
keeps no chord counters or task results, and a wave of thousands of tasks is one MULTI/EXEC.
The producer sends tasks by name; it never imports the worker (nor litellm).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import redis
from celery import Celery

from producer.wire import JudgeMessageWriter, push_wave, short_task_id
from schemas.batch import BatchConfig
from schemas.errors import ConfigurationError
from schemas.settings import Settings, deployment_queues, judge_lanes
from schemas.tasks import CellRef, SampleRef

__all__ = ["short_task_id"]  # re-exported: tests and benchmarks name tasks with it

# How often a producer waiting for room in the queues looks again.
ROOM_POLL_S = 0.2


def create_producer_app(settings: Settings) -> Celery:
    app = Celery("jury-producer", set_as_current=False)
    app.conf.update(settings.celery_config())
    # The producer never waits on a task's result, so it must not SUBSCRIBE to a result
    # channel per task sent (Celery's Redis backend does, by default), nor UNSUBSCRIBE when
    # the discarded AsyncResult is collected (which, at exit, may find Redis already stopped).
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


def judge_queues(app: Celery, config: BatchConfig) -> dict[str, str]:
    """Each judge's lane (schemas.settings.judge_lanes)."""
    queue, lanes = app.conf.task_default_queue, int(app.conf.jury_lanes)
    return judge_lanes(queue, lanes, [judge.name for judge in config.panel])


def all_samples(config: BatchConfig) -> list[tuple[str, int]]:
    return [(j.name, index) for j in config.panel for index in range(j.n)]


def cell_samples(cell: CellRef, samples: Iterable[tuple[str, int]]) -> Iterable[SampleRef]:
    return (SampleRef(*cell, judge, index) for judge, index in samples)


class Publisher:
    """Writes one batch's judge tasks onto the lanes, never more than `max_queued` waiting."""

    def __init__(self, app: Celery, config: BatchConfig) -> None:
        self.client = redis.Redis.from_url(app.conf.broker_url, socket_timeout=30)
        self.writer = JudgeMessageWriter(app)
        self.queues = judge_queues(app, config)
        self.all_queues = deployment_queues(app.conf.task_default_queue, int(app.conf.jury_lanes))
        self.max_queued = int(app.conf.jury_max_queued)
        self.wave_size = int(app.conf.jury_publish_wave)

    def publish(self, refs: Iterable[SampleRef], cursor: tuple[str, int, int] | None = None) -> int:
        """One wave, in one transaction (with the cursor, if given); returns its size."""
        wave: dict[str, list[str]] = {}
        for ref in refs:
            queue = self.queues[ref.judge]
            wave.setdefault(queue, []).append(self.writer.message(ref, queue))
        push_wave(self.client, wave, cursor)
        return sum(len(messages) for messages in wave.values())

    def queued(self) -> int:
        """Judge tasks waiting in this deployment's queues (all batches)."""
        with self.client.pipeline(transaction=False) as pipe:
            for queue in self.all_queues:
                pipe.llen(queue)
            return sum(pipe.execute())

    def wait_for_room(self, n: int, keep_going: Callable[[], bool] = lambda: True) -> bool:
        """Block until `n` more tasks fit under `max_queued`; False if `keep_going` says stop.

        A wave larger than the bound is let through once the queues are empty, so that the
        bound slows a submission down but never stalls it.
        """
        while True:
            queued = self.queued()
            if queued + n <= self.max_queued or queued == 0:
                return True
            if not keep_going():
                return False
            time.sleep(ROOM_POLL_S)

    def close(self) -> None:
        self.client.close()
