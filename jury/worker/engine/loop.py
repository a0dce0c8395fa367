"""The worker process's one event loop, in a thread of its own.

Every judge call of a worker process runs on this loop (`litellm.acompletion`), so hundreds can
be in flight at once and their waits cost no thread. It lives as long as the process: LiteLLM
keeps its HTTP sessions per loop, and a loop per call would rebuild them every time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class EventLoopThread:
    """An asyncio loop running in a daemon thread; coroutines are handed to it from others."""

    def __init__(self, name: str = "jury-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._started.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._started.set)
        self.loop.run_forever()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule `coroutine` on the loop; its result arrives in the returned future."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on the loop and wait for its result in the calling thread."""
        return self.submit(coroutine).result()

    @property
    def in_loop(self) -> bool:
        return threading.current_thread() is self._thread

    def stop(self, timeout: float = 5.0) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
