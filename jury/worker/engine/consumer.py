"""Celery's consumer, with one log line for each message it refuses before any task runs.

Celery already refuses a message whose content type is not accepted (jury accepts JSON only:
a pickle is never loaded), a message naming a task that is not registered, and one that is no
task message at all; it acknowledges or rejects it so it never comes back. But it logged each
with the message's whole body and headers and a traceback, a dozen lines that a forged message
chose. Here each refusal is one line naming the message (its id and task name, quoted), and
the message is dropped as Celery drops it. Selected with Celery's `worker_consumer` setting
(jury.worker.app). Read in celery 5.7.0: celery/worker/consumer/consumer.py
(`create_task_handler`, `on_unknown_message`, `on_unknown_task`, `on_invalid_task`,
`on_decode_error`) and celery/worker/request.py (`Request.__init__` unpacks the body).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery import signals
from celery.worker.consumer.consumer import Consumer

from jury.schemas.task_messages import shown
from jury.schemas.tasks import AGGREGATE_TASK, GENERATE_TASK, JUDGE_TASK

JURY_TASKS = frozenset({JUDGE_TASK, AGGREGATE_TASK, GENERATE_TASK})

log = logging.getLogger("jury.worker")


def _named(message: Any) -> str:
    headers = message.headers if isinstance(message.headers, dict) else {}
    return f"{shown(headers.get('task'))} [{shown(headers.get('id'))}]"


class RefusingConsumer(Consumer):
    """Celery's consumer; its refusals of a message are one line each."""

    def update_strategies(self) -> None:
        super().update_strategies()
        # Only jury's own tasks run. Celery's built-ins (celery.group, celery.chord_unlock,
        # celery.accumulate, …) are registered in every app; a message naming one is refused
        # as a task this worker does not know.
        for name in [n for n in self.strategies if n not in JURY_TASKS]:
            del self.strategies[name]

    def create_task_handler(self, *args: Any, **kwargs: Any) -> Callable[[Any], Any]:
        handle = super().create_task_handler(*args, **kwargs)
        passed_on = (*self.connection_errors, *self.channel_errors)

        def on_task_received(message: Any) -> Any:
            # Celery reads a message's headers and body as it makes the task's request, and a
            # message that does not fit (a body that is not [args, kwargs, options], a header
            # missing) raised there, out of the consumer: "Unrecoverable error", and the
            # worker stopped, its tasks given back. One forged message must not stop a worker:
            # it is refused like any message Celery cannot read. A lost connection is still
            # Celery's to handle.
            try:
                return handle(message)
            except passed_on:
                raise
            except Exception as exc:
                return self.on_invalid_task(None, message, exc)

        return on_task_received

    def on_unknown_message(self, body: Any, message: Any) -> None:
        log.warning("dropped a message that is no task message (%s)", shown(message.headers))
        message.reject_log_error(log, self.connection_errors)
        signals.task_rejected.send(sender=self, message=message, exc=None)

    def on_unknown_task(self, body: Any, message: Any, exc: Exception) -> None:
        log.warning("dropped a message of task %s: no such task", _named(message))
        message.reject_log_error(log, self.connection_errors)
        signals.task_rejected.send(sender=self, message=message, exc=exc)

    def on_invalid_task(self, body: Any, message: Any, exc: Exception) -> None:
        log.warning("dropped a message of task %s: %s", _named(message), shown(str(exc), 200))
        message.reject_log_error(log, self.connection_errors)
        signals.task_rejected.send(sender=self, message=message, exc=exc)

    def on_decode_error(self, message: Any, exc: Exception) -> None:
        log.warning(
            "dropped a message that cannot be decoded (%s): %s",
            shown(message.content_type),
            shown(str(exc), 200),
        )
        message.ack()
