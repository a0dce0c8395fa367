"""Group commit (jury.worker.engine.grouping): items submitted while a group waits or runs go
together; a lingering group waits for more items, a plain one does not."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from jury.worker.engine.grouping import Grouped


class Recorder:
    def __init__(self) -> None:
        self.groups: list[list[int]] = []

    async def __call__(self, items: Sequence[int]) -> list[int]:
        self.groups.append(list(items))
        await asyncio.sleep(0)
        return [2 * n for n in items]


async def _spread(grouped: Grouped[int, int], n: int, gap_s: float) -> list[int]:
    """Submit n items, one every gap_s, and wait for every result."""
    waits = []
    for i in range(n):
        waits.append(asyncio.ensure_future(grouped.submit(i)))
        await asyncio.sleep(gap_s)
    return list(await asyncio.gather(*waits))


def test_a_lingering_group_collects_items_that_come_apart() -> None:
    recorder = Recorder()
    results = asyncio.run(_spread(Grouped(recorder, linger_s=0.3), 5, 0.01))
    assert results == [0, 2, 4, 6, 8]
    assert recorder.groups == [[0, 1, 2, 3, 4]]


def test_without_linger_items_that_come_apart_go_alone() -> None:
    recorder = Recorder()
    results = asyncio.run(_spread(Grouped(recorder), 5, 0.01))
    assert results == [0, 2, 4, 6, 8]
    assert recorder.groups == [[0], [1], [2], [3], [4]]


def test_a_full_group_does_not_linger() -> None:
    recorder = Recorder()

    async def burst() -> float:
        grouped: Grouped[int, int] = Grouped(recorder, max_group=3, linger_s=30.0)
        loop = asyncio.get_running_loop()
        started = loop.time()
        await asyncio.gather(*(grouped.submit(i) for i in range(3)))
        return loop.time() - started

    assert asyncio.run(burst()) < 5.0
    assert recorder.groups == [[0, 1, 2]]
