"""The sweeper: finalizes cells whose samples are all stored but whose verdict is missing,
and (worker.watchdog) queues again what a lost task left missing.

A complete cell lacks its verdict when the worker that stored its last sample died before
building it. Every worker runs a sweeper thread; a Redis lock lets one of them sweep per
interval, cluster-wide.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable

import redis

from schemas.adaptive import first_round
from schemas.settings import Settings
from schemas.tasks import CellRef
from store.cells import complete_cells_without_verdict
from store.repository import running_batches
from worker.runtime import WorkerRuntime
from worker.watchdog import requeue_lost_tasks

log = logging.getLogger("jury.sweeper")


def sweep_once(runtime: WorkerRuntime) -> int:
    """Finalize every complete cell without a verdict in the running batches; returns how many."""
    finalized = 0
    for batch_id in running_batches(runtime.sessions):
        config = runtime.config(batch_id)
        # An adaptive cell may be complete with its first round alone.
        minimum = len(first_round(config))
        checked: set[CellRef] = set()
        while cells := [
            cell
            for cell in complete_cells_without_verdict(runtime.sessions, batch_id, minimum)
            if cell not in checked
        ]:
            for cell in cells:
                checked.add(cell)
                if runtime.finalize_if_complete(cell) is not None:
                    finalized += 1
    if finalized:
        log.info("sweeper finalized %d cells", finalized)
    return finalized


class SweeperThread(threading.Thread):
    def __init__(self, settings: Settings, runtime: Callable[[], WorkerRuntime]) -> None:
        super().__init__(name="jury-sweeper", daemon=True)
        self.settings = settings
        self.runtime = runtime
        self.stopped = threading.Event()
        self.lock_key = f"jury:sweeper:{settings.queue}"
        self.node = f"{socket.gethostname()}:{id(self)}"

    def run(self) -> None:
        client = redis.Redis.from_url(self.settings.broker_url, socket_timeout=10)
        interval = self.settings.sweep_interval_s
        while not self.stopped.wait(interval):
            try:
                # Held for one interval: at most one sweep per interval across the cluster.
                if client.set(self.lock_key, self.node, nx=True, px=int(interval * 1000)):
                    runtime = self.runtime()
                    sweep_once(runtime)
                    requeue_lost_tasks(runtime, client)
            except Exception:
                log.exception("sweep failed; trying again in %.0f s", interval)

    def stop(self) -> None:
        self.stopped.set()
