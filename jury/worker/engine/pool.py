"""The worker engine's Celery pool: task bodies run as coroutines on one event loop per process.

Celery stays the queue and the unit of delivery (one message per judge task, acknowledged
when the task is done), but no thread runs a task: `on_apply` decodes the message, starts the
task's async body (`engine_body`, set by jury.worker.tasks) on the worker's event loop, and
returns at once, so a process holds as many tasks in flight as Celery's prefetch window
allows, each costing a coroutine. That window adapts (jury.worker.engine.window: it grows
while calls wait on the network and CPU is spare, shrinks under CPU or memory pressure or
push-back) up to the worker's concurrency (JURY_WORKER_CONCURRENCY), its ceiling.
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
import resource
import threading
import time
from collections.abc import Callable
from typing import Any

from celery.concurrency.base import BasePool, apply_target
from kombu.serialization import loads, prepare_accept_content

from jury.schemas.task_messages import refused, shown
from jury.worker.engine.window import Observation, WindowController, WindowLimits

log = logging.getLogger("jury.worker")

# Threads for tasks that are not jury's (none, normally).
FALLBACK_THREADS = 4
# How often the window is decided (seconds).
WINDOW_INTERVAL_S = 1.0
# File descriptors kept for everything but the calls' sockets (Redis, the store, logs).
SPARE_FILES = 512


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
        # Counted by one thread each (tasks applied: the consumer's; reported: the
        # completion thread's; ended and pushed back: the event loop's), so no count is lost.
        self._applied = 0
        self._reported = 0
        self._ended = 0
        self._pushed_back = 0
        self.window: WindowAdapter | None = None

    @property
    def in_flight(self) -> int:
        return self._applied - self._reported

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
            self._applied += 1
            nothing = (*args[:3], ([], {}, None), None, None, *args[6:])
            self._finished.put(functools.partial(self._report, target, nothing, kwargs, callback))
            return
        traced = (*args[:3], (task_args, {}, None), None, None, *args[6:])
        self._applied += 1

        def finished(future: concurrent.futures.Future[Any]) -> None:
            self._ended += 1
            try:
                outcome = future.result()
                self._pushed_back += pushed_back(outcome)
                OUTCOMES.put(task_id, outcome)
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
        self._reported += 1
        apply_target(target, args, kwargs, callback)

    def _complete(self) -> None:
        while (step := self._finished.get()) is not None:
            try:
                step()
            except Exception:
                log.exception("reporting a finished task failed")

    def _get_info(self) -> dict[str, Any]:
        info = super()._get_info()
        info.update({"in-flight": self.in_flight})
        if self.window is not None:
            info.update({"window": self.window.controller.window})
        return info

    def adapt_window(self, consumer: Any, limits: WindowLimits, loop: Any) -> WindowAdapter:
        """Start adapting the prefetch window of `consumer` (Celery's, whose pool this is);
        `loop`: the event loop the bodies run on."""
        self.window = WindowAdapter(self, consumer, limits, loop)
        return self.window


def pushed_back(outcome: Any) -> int:
    """1 if a body's outcome is the provider (or the store) pushing back: the task was parked
    for later (jury.worker.tasks.Parked: a rate-limit slot, a 429's wait, the store down), or
    it failed on a 429 after its attempts."""
    if getattr(outcome, "delay_s", None) is not None:
        return 1
    return int(getattr(outcome, "kind", None) == "rate_limited")


def open_files_for(ceiling: int) -> int:
    """Raise this process's soft limit of open files toward its hard one so that `ceiling`
    calls (a socket each) fit; returns the window the limit allows (at most `ceiling`)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = ceiling + SPARE_FILES
    if soft != resource.RLIM_INFINITY and soft < wanted:
        raised = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return ceiling
    allowed = max(1, soft - SPARE_FILES)
    log.warning(
        "open files are limited to %d (ulimit -n): the window stays under %d, not %d; raise "
        "the limit (ulimit -n %d, or LimitNOFILE= in a systemd unit) to reach it",
        soft,
        allowed,
        ceiling,
        wanted,
    )
    return allowed


def _rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * PAGE_BYTES
    except (OSError, ValueError, IndexError):
        return None


PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class WindowAdapter:
    """Observes the pool every WINDOW_INTERVAL_S and applies the controller's window to
    Celery's prefetch count, in the consumer's own thread (a timer of its event loop).

    Applied as Celery's autoscaler and its `pool_grow`/`pool_shrink` commands apply a new pool
    size (read in celery 5.7.0: celery/worker/autoscale.py `Autoscaler.update`,
    celery/worker/control.py `pool_grow`): the pool's size (`limit`, its `num_processes`) is
    set, then `Consumer._update_prefetch_count(difference)` sets the consumer's
    `initial_prefetch_count` from it and moves kombu's QoS value by the difference
    (kombu/common.py `QoS.increment_eventually`/`decrement_eventually`, thread safe); the
    consumer's loop sends the new count when it sees it changed (celery/worker/loops.py
    `asynloop`: `if qos.prev != qos.value: update_qos()`). With kombu's Redis transport the
    count is checked before each fetch (kombu/transport/virtual/base.py `QoS.can_consume`),
    so a smaller window takes no new task until enough in flight have ended. After a lost
    connection Celery rebuilds its QoS from `initial_prefetch_count` and restores it toward
    `max_prefetch_count` (pool.num_processes: the window), so the window holds there too."""

    def __init__(self, pool: EnginePool, consumer: Any, limits: WindowLimits, loop: Any) -> None:
        self.pool, self.consumer, self.loop = pool, consumer, loop
        self.controller = WindowController(limits)
        self._logged = self.controller.window
        self._cpu = time.process_time()
        self._at = time.monotonic()
        self._counts = (pool._ended, pool._pushed_back)
        self._probe_sent = self._at
        self._probe_ran: float | None = None
        self._apply(self.controller.window)
        loop.call_soon_threadsafe(self._probed)
        consumer.timer.call_repeatedly(WINDOW_INTERVAL_S, self.tick)
        log.info(
            "window %d tasks in flight (adapts up to %d; JURY_WORKER_CONCURRENCY)",
            self.controller.window,
            limits.ceiling,
        )

    def _probed(self) -> None:
        self._probe_ran = time.monotonic()

    def observe(self) -> Observation:
        now, cpu = time.monotonic(), time.process_time()
        ended, pushed = self.pool._ended, self.pool._pushed_back
        ran = self._probe_ran
        lag = (ran if ran is not None else now) - self._probe_sent
        seen = Observation(
            in_flight=self.pool.in_flight,
            cpu_share=(cpu - self._cpu) / max(now - self._at, 1e-3),
            loop_lag_s=max(0.0, lag),
            rss_bytes=_rss_bytes(),
            ended=ended - self._counts[0],
            pushed_back=pushed - self._counts[1],
        )
        self._cpu, self._at, self._counts = cpu, now, (ended, pushed)
        if ran is not None:  # the next probe, once the last one has run
            self._probe_sent, self._probe_ran = now, None
            self.loop.call_soon_threadsafe(self._probed)
        return seen

    def tick(self) -> None:
        try:
            seen = self.observe()
            before = self.controller.window
            after = self.controller.decide(seen)
            if after != before:
                self._apply(after)
                self._log(after, seen)
        except Exception:  # a window kept is no harm; the consumer's timer must go on
            log.exception("adapting the window failed")

    def _apply(self, window: int) -> None:
        difference = window - self.pool.limit
        if difference:
            self.pool.limit = window
            self.consumer._update_prefetch_count(difference)

    def _log(self, window: int, seen: Observation) -> None:
        """One line when the window moved by a fifth since the last line, or reached its
        ceiling or start: a line a few times in a batch, not one a second."""
        limits = self.controller.limits
        moved = abs(window - self._logged)
        if moved < max(1, self._logged // 5) and window not in (limits.ceiling, limits.start):
            return
        self._logged = window
        rss = "" if seen.rss_bytes is None else f", RSS {seen.rss_bytes / 2**20:.0f} MB"
        log.info(
            "window %d tasks in flight, of %d: %s (%d in flight, CPU %.0f %%, loop lag %.0f ms%s)",
            window,
            limits.ceiling,
            self.controller.reason,
            seen.in_flight,
            100 * seen.cpu_share,
            1000 * seen.loop_lag_s,
            rss,
        )

    def report(self) -> dict[str, int]:
        """What the heartbeat publishes (`jury status` shows it)."""
        return {
            "window": self.controller.window,
            "in_flight": self.pool.in_flight,
            "ceiling": self.controller.limits.ceiling,
        }
