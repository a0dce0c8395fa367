"""Publishing judge tasks: one per (item, dimension, judge, sample), in waves, with
back-pressure.

The tasks of one cell are the header of its chord, and its body, the `jury.aggregate_cell`
callback, is sent by the judge task that stores the cell's last sample
(jury.worker.judging.pipeline):
the barrier counts stored samples, not finished messages, so a message is one small task,
Redis keeps no chord counters or task results, and a wave of thousands of tasks is one
MULTI/EXEC.
The producer sends tasks by name; it never imports the worker (nor litellm).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from celery import Celery

from jury.broker import keys as redis_keys
from jury.broker.parking import Parking
from jury.broker.redis_client import BrokerRedis
from jury.broker.wire import TaskMessageWriter, push_wave, short_task_id
from jury.producer.pacing import PublicationPace
from jury.schemas.batch import BatchConfig
from jury.schemas.tasks import (
    GENERATE_TASK,
    CellRef,
    GenerationRef,
    SampleRef,
)
from jury.settings import Settings, deployment_queues, judge_lanes

__all__ = ["short_task_id"]  # re-exported: tests and benchmarks name tasks with it

# How often a producer waiting for room in the queues looks again.
ROOM_POLL_S = 0.2


def create_producer_app(settings: Settings) -> Celery:
    app = Celery("jury-producer", set_as_current=False)
    app.conf.update(settings.celery_config())
    return app


def check_broker(settings: Settings) -> None:
    """Fail fast, with a clear message, when Redis does not answer (or is not Redis)."""
    BrokerRedis.from_settings(settings, socket_timeout=3).close()


def judge_queues(app: Celery, config: BatchConfig) -> dict[str, str]:
    """Each judge's lane (schemas.settings.judge_lanes)."""
    queue, lanes = app.conf.task_default_queue, int(app.conf.jury_lanes)
    return judge_lanes(queue, lanes, [judge.name for judge in config.panel])


def all_samples(config: BatchConfig) -> list[tuple[str, int]]:
    return [(j.name, index) for j in config.panel for index in range(j.n)]


def cell_samples(cell: CellRef, samples: Iterable[tuple[str, int]]) -> Iterable[SampleRef]:
    return (SampleRef(*cell, judge, index) for judge, index in samples)


class Publisher:
    """Writes one batch's judge tasks onto the lanes (or parks them until their judge's quota
    has room), never more than `max_queued` waiting."""

    def __init__(self, app: Celery, config: BatchConfig) -> None:
        self.broker = BrokerRedis.from_app(app, socket_timeout=30)
        self.client = self.broker.client
        self.writer = TaskMessageWriter(app)
        self.generation_writer = TaskMessageWriter(app, GENERATE_TASK)
        self.base_queue = str(app.conf.task_default_queue)
        self.queues = judge_queues(app, config)
        self.all_queues = deployment_queues(app.conf.task_default_queue, int(app.conf.jury_lanes))
        self.max_queued = int(app.conf.jury_max_queued)
        self.wave_size = int(app.conf.jury_publish_wave)
        self.pace = PublicationPace(
            config, float(app.conf.jury_rate_horizon_s), float(app.conf.jury_rate_margin)
        )
        self.parking = Parking(self.broker)

    def publish(self, refs: Iterable[SampleRef], cursor: tuple[str, int, int] | None = None) -> int:
        """One wave, in one transaction (with the cursor, if given); returns its size. A task
        whose judge's quota has no room for it soon is parked until it has (producer.pacing)."""
        wave: dict[str, list[str]] = {}
        parked: list[tuple[str, str, float]] = []
        batches: set[str] = set()
        for ref in refs:
            queue = self.queues[ref.judge]
            delay_s = self.pace.delay_s(ref.judge)
            if delay_s > 0:
                # Waiting for its slot from now, as a task its worker parks does.
                waiting = {"waited_s": 0.0, "parked_at": round(time.time(), 3)}
                parked.append((queue, self.writer.message(ref, queue, waiting), delay_s))
            else:
                wave.setdefault(queue, []).append(self.writer.message(ref, queue))
            batches.add(ref.batch_id)
        push_wave(self.broker, wave, cursor, parked, self._marks(batches))
        return len(parked) + sum(len(messages) for messages in wave.values())

    def publish_generations(
        self, refs: Iterable[GenerationRef], cursor: tuple[str, int, int] | None = None
    ) -> int:
        """A wave of generation tasks (a batch with candidates), on the base queue."""
        queue = self.base_queue
        refs = list(refs)
        messages = [self.generation_writer.message(ref, queue) for ref in refs]
        batches = {ref.batch_id for ref in refs}
        push_wave(self.broker, {queue: messages}, cursor, marks=self._marks(batches))
        return len(messages)

    def _marks(self, batches: Iterable[str]) -> dict[str, str]:
        """Each of `batches` marked as this deployment's, for its lost-task watch
        (worker.watchdog): deployments sharing a database see each other's batches."""
        return {redis_keys.batch_mark(self.base_queue, batch): self.base_queue for batch in batches}

    def queued(self) -> int:
        """Tasks of this deployment waiting in its queues, parked, or in a model's line for
        an in-flight slot (all batches): those take Redis' memory as queued ones do, and a
        slow local server's tasks all wait in its line."""
        return self.broker.queued(self.all_queues) + self.parking.count_for(self.all_queues)

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
        self.broker.close()
