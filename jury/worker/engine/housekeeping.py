"""A worker's housekeeping thread: what keeps the cluster moving besides the tasks themselves.

Every tick (a quarter of a second) it moves parked tasks that are due back to their queues;
every few seconds it beats (jury.worker.engine.liveness), gives back the messages of dead workers,
releases waiting lines whose model has free slots; every sweep interval it sweeps (the chord's
safety net and the lost-task watch). Each step is cluster-wide safe: a Redis lock or an atomic
script makes one worker do it at a time, and a step that fails is logged and tried again.

This thread needs the GIL to beat: C code that holds it for long in another thread of the
process starves the heartbeat, and the worker is reaped as dead while it lives (its tasks
then run and are paid twice). So no task runs unbounded CPU work in this process: heuristic
judges, whose patterns and functions come from batch files, are measured in processes of
their own, killed at their deadline (jury.worker.judging.heuristic_pool).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable

from jury.broker.parking import Parking
from jury.broker.redis_client import log_step_failure, outage
from jury.worker.calls.provider_batches import ProviderBatches
from jury.worker.engine.liveness import HeldMessages, Liveness
from jury.worker.engine.sweeper import sweep_if_mine
from jury.worker.runtime import WorkerRuntime

log = logging.getLogger("jury.worker")

TICK_S = 0.25
# How often waiting lines are checked for free slots whose holder died.
LINES_INTERVAL_S = 2.0


class Housekeeper(threading.Thread):
    def __init__(self, runtime: Callable[[], WorkerRuntime], held: HeldMessages | None) -> None:
        super().__init__(name="jury-housekeeping", daemon=True)
        self.runtime = runtime
        self.held = held
        self.stopped = threading.Event()
        self.node = f"{socket.gethostname()}:{id(self)}"
        self.liveness: Liveness | None = None

    def run(self) -> None:
        runtime = self.runtime()
        settings = runtime.settings
        parking = Parking(runtime.redis)
        if self.held is not None:
            self.liveness = Liveness(settings, runtime.redis, self.held)
        beat_every = max(TICK_S, settings.heartbeat_timeout_s / 12)
        # Provider batches (docs/batch-api.md) in a thread of their own: storing a large one's
        # lines takes seconds, which must not hold up parked tasks and heartbeats.
        ProviderBatchThread(self.runtime, self.node, self.stopped).start()
        due = {"beat": 0.0, "lines": 0.0, "sweep": time.monotonic() + settings.sweep_interval_s}
        while not self.stopped.wait(TICK_S):
            now = time.monotonic()
            self._step("moving parked tasks", parking.release_due)
            if self.liveness is not None and now >= due["beat"]:
                due["beat"] = now + beat_every
                self._step("beating", self.liveness.beat)
                self._step("giving back dead workers' tasks", self.liveness.reap)
            if now >= due["lines"]:
                due["lines"] = now + LINES_INTERVAL_S
                self._step("releasing waiting lines", runtime.limiter.release_waiters)
            if now >= due["sweep"]:
                due["sweep"] = now + settings.sweep_interval_s
                self._step("sweeping", lambda: sweep_if_mine(runtime, self.node))

    def _step(self, what: str, step: Callable[[], object]) -> None:
        try:
            step()
        except Exception as exc:
            log_step_failure(log, what, exc)

    def stop(self) -> None:
        self.stopped.set()
        if self.ident is not None:  # a worker stopped before it was ready never started it
            self.join(5)
        if self.liveness is not None:
            try:
                self.liveness.leave()
            except Exception as exc:  # one line: the worker is stopping anyway
                log.warning("could not remove this worker's heartbeat: %s", outage(exc) or exc)


class ProviderBatchThread(threading.Thread):
    """Runs a worker's ProviderBatches every `batch_api_step_s` until stopped."""

    def __init__(
        self, runtime: Callable[[], WorkerRuntime], node: str, stopped: threading.Event
    ) -> None:
        super().__init__(name="jury-batch-api", daemon=True)
        self.runtime = runtime
        self.node = node
        self.stopped = stopped

    def run(self) -> None:
        runtime = self.runtime()
        batches = ProviderBatches(runtime, self.node)
        while not self.stopped.wait(runtime.settings.batch_api_step_s):
            try:
                batches.step()
            except Exception as exc:
                log_step_failure(log, "provider batches step", exc)
