"""The worker engine's Celery pool: task bodies run as coroutines on one event loop per process.

Celery stays the queue and the unit of delivery (one message per judge task, acknowledged
when the task is done), but no thread runs a task: `on_apply` decodes the message, starts the
task's async body (`engine_body`, set by jury.worker.tasks) on the worker's event loop, and
returns at once, so a process holds as many tasks in flight as its concurrency allows
(Celery's prefetch window: concurrency × worker_prefetch_multiplier), each costing a coroutine.
When a body ends, Celery's own tracer runs the task function in the pool's completion thread:
the task function only hands over the outcome the body left (a result, an expected failure,
or a retry), and Celery's tracer and Request do the rest as they would for any pool —
acknowledgement, task events for Flower, the log line. Tasks without an `engine_body`
(anything not jury's) run in a small thread pool, as under Celery's `threads` pool.

Selected with `--pool custom` and CELERY_CUSTOM_WORKER_POOL=jury.worker.engine.pool:EnginePool
(Celery's documented way to plug in a pool; `jury worker` sets both).
Relied on, read in celery 5.7.0: celery/concurrency/base.py (BasePool, apply_target),
celery/worker/request.py (Request.execute_using_pool passes the tracer and the message's
(name, id, request, body, content_type, content_encoding); on_accepted/on_success/on_retry).
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from celery.concurrency.base import BasePool, apply_target
from kombu.serialization import loads, prepare_accept_content

from jury.schemas.task_messages import refused, shown

log = logging.getLogger("jury.worker")

# Threads for tasks that are not jury's (none, normally).
FALLBACK_THREADS = 4


class EngineOutcomes:
    """Outcomes of bodies that ran on the loop, until the task function collects them."""

    def __init__(self) -> None:
        self._outcomes: dict[str, Any] = {}
        self._lock = threading.Lock()

    def put(self, task_id: str, outcome: Any) -> None:
        with self._lock:
            self._outcomes[task_id] = outcome

    def take(self, task_id: str) -> Any:
        """The outcome of the task's body, or None if it did not run under the engine."""
        with self._lock:
            return self._outcomes.pop(task_id, None)


OUTCOMES = EngineOutcomes()


def _arguments(decoded: Any) -> tuple[list[Any], dict[str, Any]]:
    """A task body's arguments and keyword arguments; ValueError for another shape."""
    if not isinstance(decoded, list | tuple) or len(decoded) != 3:
        raise ValueError("not [args, kwargs, options]")
    task_args, task_kwargs, options = decoded
    if not isinstance(task_args, list | tuple) or not isinstance(task_kwargs, dict):
        raise ValueError("arguments that are not a list and a mapping")
    if not isinstance(options, dict | None):
        raise ValueError("options that are not a mapping")
    return list(task_args), task_kwargs


class EnginePool(BasePool):
    """Runs each jury task's body on the event loop; Celery's tracer reports its outcome."""

    body_can_be_buffer = True
    signal_safe = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._finished: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._completer = threading.Thread(
            target=self._complete, name="jury-completion", daemon=True
        )
        self._fallback = concurrent.futures.ThreadPoolExecutor(
            FALLBACK_THREADS, thread_name_prefix="jury-task"
        )
        self._in_flight = 0

    @functools.cached_property
    def _accept(self) -> set[str] | None:
        accepted = self.app.conf.accept_content if self.app is not None else None
        return prepare_accept_content(accepted) if accepted else None

    def on_start(self) -> None:
        self._completer.start()

    def on_stop(self) -> None:
        self._finished.put(None)
        self._completer.join(10)
        self._fallback.shutdown(cancel_futures=True)

    def on_terminate(self) -> None:
        self.on_stop()

    def on_apply(
        self,
        target: Callable[..., Any],
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
        callback: Callable[..., Any] | None = None,
        accept_callback: Callable[..., Any] | None = None,
        **_: Any,
    ) -> None:
        args = tuple(args or ())
        kwargs = kwargs or {}
        name, task_id, _request, body, content_type, content_encoding = args[:6]
        task = self.app.tasks.get(name) if self.app is not None else None
        start_body = getattr(task, "engine_body", None)
        if start_body is None:
            self._fallback.submit(apply_target, target, args, kwargs, callback, accept_callback)
            return
        if accept_callback is not None:
            accept_callback(os.getpid(), time.monotonic())
        # The tracer takes a body decoded already when it is given no content type (celery
        # 5.7.0, app/trace.py: fast_trace_task and trace_task_ret): the message's JSON is
        # decoded once, here. The tracer gets no keyword arguments and no options (callbacks,
        # chains, chords): the body reads the message's own, and a message is input, never
        # told what to run next. A body of another shape is refused in one line, reported by
        # the tracer as any refusal (task_messages), so it is acknowledged, never lost.
        try:
            task_args, task_kwargs = _arguments(
                loads(body, content_type, content_encoding, accept=self._accept)
            )
        except Exception as exc:
            what = f"{shown(name)} task"
            OUTCOMES.put(task_id, refused(what, f"its body is no task's ({shown(str(exc))})"))
            self._in_flight += 1
            nothing = (*args[:3], ([], {}, None), None, None, *args[6:])
            self._finished.put(functools.partial(self._report, target, nothing, kwargs, callback))
            return
        traced = (*args[:3], (task_args, {}, None), None, None, *args[6:])
        self._in_flight += 1

        def finished(future: concurrent.futures.Future[Any]) -> None:
            try:
                OUTCOMES.put(task_id, future.result())
            except BaseException as exc:  # reported by the tracer, never lost
                OUTCOMES.put(task_id, exc)
            self._finished.put(lambda: self._report(target, traced, kwargs, callback))

        start_body(task_id, task_args, task_kwargs).add_done_callback(finished)

    def _report(
        self,
        target: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        callback: Callable[..., Any] | None,
    ) -> None:
        """Celery's tracer and the Request's callbacks: ack, events, the log line."""
        self._in_flight -= 1
        apply_target(target, args, kwargs, callback)

    def _complete(self) -> None:
        while (step := self._finished.get()) is not None:
            try:
                step()
            except Exception:
                log.exception("reporting a finished task failed")

    def _get_info(self) -> dict[str, Any]:
        info = super()._get_info()
        info.update({"in-flight": self._in_flight})
        return info
