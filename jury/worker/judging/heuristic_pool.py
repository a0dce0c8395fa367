"""Processes that measure a worker's heuristic samples, each killed at its judge's timeout_s.

`asyncio.to_thread` plus `wait_for` cannot stop a backtracking regex or a callable stuck in C
code: the thread runs on, holding the GIL, and the worker's other threads (its heartbeat
among them: jury.worker.engine.housekeeping) wait for it. So a heuristic is measured in a
process of its own (jury.worker.judging.heuristic_process), and past the deadline that
process is killed with everything it started, and the sample fails (`heuristic_timeout`).
The worker's side only waits on a pipe (select releases the GIL).

The processes start when first needed and are kept: a measure costs a round trip through a
pipe, not a Python start. A killed one is replaced by the next request. A pool serves every
thread of its worker process; its own thread pool (one thread per process) does the waiting,
so heuristics never hold the event loop's default executor, which the store needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pickle
import queue
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from jury.schemas.heuristics import HeuristicError
from jury.worker.judging.heuristic_process import HEADER, READY, MeasureRequest

# A Python start with pydantic and RE2 takes a fraction of a second; a loaded machine, more.
START_TIMEOUT_S = 60.0
# A reply holds a score and a line of why per dimension and text.
MAX_REPLY_BYTES = 1 << 20
# What a measuring process sees of the worker's environment: never its keys.
_ENV_KEPT = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "VIRTUAL_ENV")


class _Measurer:
    """One measuring process and its pipes."""

    def __init__(self, allowed: Sequence[str], memory_mib: int) -> None:
        env = {k: os.environ[k] for k in _ENV_KEPT if k in os.environ}
        # The worker's own import path, so a callable imports what the producer checked.
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jury.worker.judging.heuristic_process",
                str(memory_mib),
                *allowed,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own process group: a kill takes what it started
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._in = self.process.stdin.fileno()
        self._out = self.process.stdout.fileno()
        os.set_blocking(self._in, False)
        os.set_blocking(self._out, False)
        self._buffer = b""
        if self._line(time.monotonic() + START_TIMEOUT_S) != READY.strip():
            self.kill()
            raise HeuristicError(
                "the process that measures heuristics did not start", kind="heuristic_process"
            )

    def ask(self, request: MeasureRequest) -> dict[str, Any]:
        """The reply to `request`, or HeuristicError (and this process killed) past its
        timeout_s."""
        deadline = time.monotonic() + request.timeout_s
        body = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
        self._send(HEADER.pack(len(body)) + body, deadline)
        line = self._line(deadline)
        try:
            reply = json.loads(line)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            self.kill()
            raise HeuristicError("the measuring process answered garbage", kind="heuristic_process")
        return reply

    def _send(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        with selectors.DefaultSelector() as selector:
            selector.register(self._in, selectors.EVENT_WRITE)
            while view:
                if not selector.select(self._remaining(deadline)):
                    continue  # _remaining raises once the deadline has passed
                try:
                    view = view[os.write(self._in, view) :]
                except BlockingIOError:
                    continue
                except OSError:
                    self._died()

    def _line(self, deadline: float) -> bytes:
        with selectors.DefaultSelector() as selector:
            selector.register(self._out, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                if len(self._buffer) > MAX_REPLY_BYTES:
                    self.kill()
                    raise HeuristicError(
                        f"the measuring process answered over {MAX_REPLY_BYTES:,} bytes",
                        kind="heuristic_process",
                    )
                if not selector.select(self._remaining(deadline)):
                    continue
                try:
                    chunk = os.read(self._out, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    self._died()
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _remaining(self, deadline: float) -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            self.kill()
            raise TimeoutError
        return left

    def _died(self) -> None:
        self.kill()
        code = self.process.returncode
        why = f"signal {-code}" if code is not None and code < 0 else f"exit {code}"
        if code == -signal.SIGXCPU:
            why += ", its CPU time ran out"
        raise HeuristicError(f"the measuring process ended ({why})", kind="heuristic_process")

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


class HeuristicPool:
    """`size` measuring processes for this worker process, started when first needed."""

    def __init__(self, allowed: Sequence[str], size: int, memory_mib: int) -> None:
        self.allowed = list(allowed)
        self.memory_mib = memory_mib
        self._idle: queue.LifoQueue[_Measurer | None] = queue.LifoQueue()
        for _ in range(size):
            self._idle.put(None)  # a place for a process, started on first use
        self.executor = ThreadPoolExecutor(size, thread_name_prefix="jury-heuristics")

    async def measure(self, request: MeasureRequest) -> dict[str, Any]:
        """`run` in this pool's threads, off the event loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, self.run, request)

    def run(self, request: MeasureRequest) -> dict[str, Any]:
        """The measuring process's reply to `request`; HeuristicError past its timeout_s
        (`heuristic_timeout`) or if the process died (`heuristic_process`)."""
        measurer = self._idle.get()
        try:
            if measurer is None or not measurer.alive():
                measurer = _Measurer(self.allowed, self.memory_mib)
            try:
                return measurer.ask(request)
            except TimeoutError:
                measurer = None
                raise HeuristicError(
                    f"no score within the judge's timeout_s of {request.timeout_s:g} s: "
                    "the measure was stopped",
                    kind="heuristic_timeout",
                ) from None
            except HeuristicError:
                measurer = None
                raise
        finally:
            self._idle.put(measurer)

    def close(self) -> None:
        """Kill the idle processes (a busy one is killed by its deadline)."""
        self.executor.shutdown(wait=False, cancel_futures=True)
        while True:
            try:
                measurer = self._idle.get_nowait()
            except queue.Empty:
                return
            if measurer is not None:
                measurer.kill()
