"""A worker's housekeeping thread: what keeps the cluster moving besides the tasks themselves.

It moves parked tasks back to their queues when they fall due; every few seconds it beats
(jury.worker.engine.liveness) and gives back the messages of dead workers, and, while any model
has a waiting line, releases the lines whose model has free slots; every sweep interval it
sweeps (the chord's safety net and the lost-task watch). Each step is cluster-wide safe: a Redis
lock or an atomic script makes one worker do it at a time, and a step that fails is logged and
tried again.

It sleeps until its next step is due, not by a fixed tick: the parked set's release answers
when its next message falls due, a park in this process wakes it (jury.broker.parking's
PARKED_HERE), and it looks at the parked set at least every PARKED_LOOK_S for messages other
processes parked meanwhile. Polling the set four times a second was most of an idle worker's
Redis traffic (bench/idle).

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

from jury.broker.parking import PARKED_HERE, Parking, Released, release_ahead_s
from jury.broker.redis_client import log_step_failure, outage
from jury.worker.calls.provider_batches import ProviderBatches
from jury.worker.engine.liveness import HeldMessages, Liveness
from jury.worker.engine.sweeper import sweep_if_mine
from jury.worker.runtime import WorkerRuntime

log = logging.getLogger("jury.worker")

# The longest the parked set goes unread, unless a release reaches further ahead than this
# (parking.release_ahead_s): a message another process parked (the producer's paced waves,
# another worker's tasks) is moved at most this late, should its own worker not get there
# first (every worker wakes for its own parks when they fall due).
PARKED_LOOK_S = 1.0
# A parked message due sooner than this is released with the next ones (no busy loop).
PARKED_MIN_SLEEP_S = 0.005
# How often waiting lines are checked for free slots whose holder died (while any exists).
LINES_INTERVAL_S = 2.0
# The provider-batch thread's step grows this many times longer while it finds nothing to do.
BATCH_IDLE_STRETCH = 5


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
        beat_every = max(PARKED_MIN_SLEEP_S, settings.heartbeat_timeout_s / 12)
        # Provider batches (docs/batch-api.md) in a thread of their own: storing a large one's
        # lines takes seconds, which must not hold up parked tasks and heartbeats.
        ProviderBatchThread(self.runtime, self.node, self.stopped).start()
        now = time.monotonic()
        due = {"parked": now, "beat": now, "lines": now, "sweep": now + settings.sweep_interval_s}
        lines = 1  # until the parked set's release says how many models have a waiting line
        # Each release moves what falls due before the next look: no message parked by
        # another process is released late, however rarely the set is read.
        ahead = release_ahead_s(settings.rate_horizon_s)
        look = max(PARKED_LOOK_S, ahead)
        while not self.stopped.is_set():
            now = time.monotonic()
            if now >= due["parked"]:
                released = self._step("moving parked tasks", lambda: parking.release(ahead))
                due["parked"] = now + _next_look(released, look)
                if isinstance(released, Released):
                    lines = released.lines
            if self.liveness is not None and now >= due["beat"]:
                due["beat"] = now + beat_every
                self._step("beating", self.liveness.beat)
                self._step("giving back dead workers' tasks", self.liveness.reap)
            if now >= due["lines"]:
                due["lines"] = now + LINES_INTERVAL_S
                if lines:
                    self._step("releasing waiting lines", runtime.limiter.release_waiters)
            if now >= due["sweep"]:
                due["sweep"] = now + settings.sweep_interval_s
                self._step("sweeping", lambda: sweep_if_mine(runtime, self.node))
            if not self.stopped.is_set():
                PARKED_HERE.wait_until(min(due.values()))

    def _step(self, what: str, step: Callable[[], object]) -> object:
        try:
            return step()
        except Exception as exc:
            log_step_failure(log, what, exc)
            return None

    def stop(self) -> None:
        self.stopped.set()
        PARKED_HERE.wake()
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
        step_s = runtime.settings.batch_api_step_s
        wait_s = step_s
        while not self.stopped.wait(wait_s):
            try:
                busy = batches.step()
            except Exception as exc:
                log_step_failure(log, "provider batches step", exc)
                busy = True
            # Three SQL queries a step were half an idle worker's CPU (bench/idle): while no
            # request waits and no provider batch is due, steps grow apart, up to
            # BATCH_IDLE_STRETCH steps (a request waits its collection window anyway).
            wait_s = step_s if busy else min(wait_s * 2, step_s * BATCH_IDLE_STRETCH)


def _next_look(released: object, look_s: float = PARKED_LOOK_S) -> float:
    """How long until the parked set is read again, given the last release's answer (None:
    it failed, or nothing is parked), at most `look_s`."""
    if not isinstance(released, Released) or released.next_due_s is None:
        return look_s
    return min(look_s, max(PARKED_MIN_SLEEP_S, released.next_due_s))
