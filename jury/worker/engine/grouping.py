"""Group commit: the store work of many tasks in flight, done in one trip.

A worker holds hundreds of judge tasks on its event loop; one transaction per task would spend
more CPU on the database round trips than on the judging. A `Grouped` operation collects the
items its tasks submit while its previous group is being written, and runs them as one group
in a store thread: at low load a group is one item (no added wait), under load it grows, and
the cost per item falls. A group that fails is tried again item by item, so that one bad item
fails alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Generic, TypeVar

log = logging.getLogger("jury.worker")
Item = TypeVar("Item")
Result = TypeVar("Result")
# The most items one group takes: large enough to amortise, small enough to keep latency low.
MAX_GROUP = 256


class Expected:
    """Items on their way to one or more groups (judge tasks in their calls: their samples,
    and perhaps their cells' verdicts, are coming). A group lingering for them is woken when
    none is left."""

    def __init__(self) -> None:
        self.count = 0
        self._listeners: list[Callable[[], None]] = []

    def listen(self, wake: Callable[[], None]) -> None:
        self._listeners.append(wake)

    @contextmanager
    def coming(self) -> Iterator[None]:
        """Within this block, an item is on its way."""
        self.count += 1
        try:
            yield
        finally:
            self.count -= 1
            if self.count == 0:
                for wake in self._listeners:
                    wake()


class Grouped(Generic[Item, Result]):
    """`linger_s`: how long a group waits for more items once its first arrived (0: none).
    Worth it only where a short delay changes nothing for anyone waiting, and items come too
    far apart to meet otherwise: a cell's callback (one per several judge tasks), a throttled
    judge's samples (a rate-limit slot apart). The wait ends early once the group holds `fill`
    items; given `expected`, also once nothing is on its way: nothing else will join (a
    batch's last samples are not held back)."""

    def __init__(
        self,
        run_group: Callable[[Sequence[Item]], Awaitable[list[Result]]],
        max_group: int = MAX_GROUP,
        linger_s: float = 0.0,
        fill: int | None = None,
        expected: Expected | None = None,
    ) -> None:
        self.run_group = run_group
        self.max_group = max_group
        self.linger_s = linger_s
        self.fill = min(fill or max_group, max_group)
        self.expected = expected
        if expected is not None:
            expected.listen(self._wake)
        self._pending: list[tuple[Item, asyncio.Future[Result]]] = []
        self._running = False
        self._changed: asyncio.Event | None = None  # set while a lingering group waits

    async def submit(self, item: Item) -> Result:
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if not self._running:
            self._running = True
            asyncio.get_running_loop().create_task(self._drain())
        elif len(self._pending) >= self.fill:
            self._wake()
        return await future

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()

    def _worth_waiting(self) -> bool:
        if len(self._pending) >= self.fill:
            return False
        return self.expected is None or self.expected.count > 0

    async def _linger(self) -> None:
        """Wait up to linger_s while the group is worth waiting for."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.linger_s
        self._changed = asyncio.Event()
        try:
            while (left := deadline - loop.time()) > 0 and self._worth_waiting():
                self._changed.clear()
                with suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), left)
        finally:
            self._changed = None

    async def _drain(self) -> None:
        try:
            while self._pending:
                if self.linger_s > 0:
                    await self._linger()
                group = self._pending[: self.max_group]
                del self._pending[: self.max_group]
                await self._run(group)
        finally:
            self._running = False

    async def _run(self, group: list[tuple[Item, asyncio.Future[Result]]]) -> None:
        try:
            results = await self.run_group([item for item, _ in group])
        except Exception as exc:
            if len(group) == 1:
                _settle(group[0][1], exception=exc)
                return
            log.warning("a group of %d failed (%s); trying each alone", len(group), exc)
            for one in group:
                await self._run([one])
            return
        for (_, future), result in zip(group, results, strict=True):
            _settle(future, result=result)


def _settle(
    future: asyncio.Future[Result], result: Result | None = None, exception: Exception | None = None
) -> None:
    if future.done():
        return
    if exception is not None:
        future.set_exception(exception)
    else:
        future.set_result(result)  # type: ignore[arg-type]
