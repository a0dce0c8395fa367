"""The ways a worker queues tasks itself, all as Celery messages written by jury.broker.wire:

- judge tasks on their judge's lane: an adaptive cell's escalation, a lost task;
- chord callbacks on the deployment's base queue;
- generation tasks (a batch with candidates) on the base queue: a lost one, queued again;
- a parked task (jury.broker.parking): written again with what it carries forward (how long it
  has waited, samples the store refused) and parked until it is due, or in its model's
  waiting line for an in-flight slot.
"""

from __future__ import annotations

from typing import Any, Protocol

from celery import Celery

from jury.broker.parking import Parking
from jury.broker.redis_client import BrokerRedis
from jury.broker.wire import TaskMessageWriter, push_wave
from jury.schemas.tasks import AGGREGATE_TASK, GENERATE_TASK, CellRef, GenerationRef, SampleRef
from jury.settings import Settings


class TaskQueues(Protocol):
    def publish(self, tasks: list[tuple[SampleRef, str]]) -> None:
        """Queue judge tasks, each on the given queue (its judge's lane)."""

    def send_callbacks(self, cells: list[CellRef]) -> None:
        """Queue the chord callbacks of complete cells."""

    def publish_generations(self, refs: list[GenerationRef]) -> None:
        """Queue generation tasks, on the base queue."""

    def park(
        self,
        task: tuple[str | int, ...],
        queue: str,
        kwargs: dict[str, Any],
        delay_s: float,
        line: str = "",
        callback: bool = False,
    ) -> None:
        """Park a task (a judge task, or with `callback` a chord callback) for `delay_s`, or
        in the waiting line `line`."""


class BrokerQueues:
    def __init__(self, app: Celery, settings: Settings, broker: BrokerRedis) -> None:
        self.settings = settings
        self.broker = broker
        self.parking = Parking(broker)
        self.judges = TaskMessageWriter(app)
        self.callbacks = TaskMessageWriter(app, AGGREGATE_TASK)
        self.generations = TaskMessageWriter(app, GENERATE_TASK)

    def publish(self, tasks: list[tuple[SampleRef, str]]) -> None:
        wave: dict[str, list[str]] = {}
        for ref, queue in tasks:
            wave.setdefault(queue, []).append(self.judges.message(ref, queue))
        push_wave(self.broker, wave)

    def send_callbacks(self, cells: list[CellRef]) -> None:
        queue = self.settings.queue
        push_wave(self.broker, {queue: [self.callbacks.message(cell, queue) for cell in cells]})

    def publish_generations(self, refs: list[GenerationRef]) -> None:
        queue = self.settings.queue
        push_wave(self.broker, {queue: [self.generations.message(ref, queue) for ref in refs]})

    def park(
        self,
        task: tuple[str | int, ...],
        queue: str,
        kwargs: dict[str, Any],
        delay_s: float,
        line: str = "",
        callback: bool = False,
    ) -> None:
        writer = self.callbacks if callback else self.judges
        message = writer.message(task, queue, kwargs)
        if line:
            self.parking.wait_in_line(line, queue, message)
        else:
            self.parking.park(queue, message, delay_s)
