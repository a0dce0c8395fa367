"""Group commit (jury.worker.engine.grouping): items submitted while a group waits or runs go
together; a lingering group waits for more items, a plain one does not."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from jury.worker.engine.grouping import Expected, Grouped


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


def test_a_group_lingers_until_it_fills() -> None:
    recorder = Recorder()

    async def run() -> float:
        grouped: Grouped[int, int] = Grouped(recorder, linger_s=30.0, fill=3)
        loop = asyncio.get_running_loop()
        started = loop.time()
        await _spread(grouped, 3, 0.01)
        return loop.time() - started

    assert asyncio.run(run()) < 5.0  # not the 30 s linger: the third item filled the group
    assert recorder.groups == [[0, 1, 2]]


async def _expected_then_submitted(
    grouped: Grouped[int, int], expected: Expected, item: int, after_s: float
) -> int:
    with expected.coming():
        await asyncio.sleep(after_s)
    return await grouped.submit(item)


def test_a_group_waits_for_items_on_their_way_then_goes_when_none_is() -> None:
    recorder = Recorder()

    async def run() -> float:
        expected = Expected()
        grouped: Grouped[int, int] = Grouped(recorder, linger_s=30.0, expected=expected)
        loop = asyncio.get_running_loop()
        started = loop.time()
        results = await asyncio.gather(
            *(_expected_then_submitted(grouped, expected, i, 0.02 * i) for i in range(4))
        )
        assert results == [0, 2, 4, 6]
        return loop.time() - started

    # The last item on its way came, and none was left: the group went without its 30 s.
    assert asyncio.run(run()) < 5.0
    assert recorder.groups == [[0, 1, 2, 3]]


def test_a_group_waits_no_longer_than_its_linger_for_items_on_their_way() -> None:
    recorder = Recorder()

    async def run() -> tuple[list[list[int]], float]:
        expected = Expected()
        grouped: Grouped[int, int] = Grouped(recorder, linger_s=0.1, expected=expected)
        loop = asyncio.get_running_loop()
        started = loop.time()
        with expected.coming():  # an item that takes far longer than the linger to come
            first = await grouped.submit(1)
            groups = [list(g) for g in recorder.groups]
            waited = loop.time() - started
        assert first == 2
        return groups, waited

    groups, waited = asyncio.run(run())
    assert groups == [[1]]
    assert 0.1 <= waited < 5.0


def test_nothing_on_its_way_means_no_linger() -> None:
    recorder = Recorder()

    async def run() -> float:
        grouped: Grouped[int, int] = Grouped(recorder, linger_s=30.0, expected=Expected())
        loop = asyncio.get_running_loop()
        started = loop.time()
        await grouped.submit(5)
        return loop.time() - started

    assert asyncio.run(run()) < 5.0
    assert recorder.groups == [[5]]


def test_groups_sharing_what_is_expected_both_go_when_nothing_is() -> None:
    """The store's group and the verdicts' wait on the same judge tasks: the last one's end
    sends both on at once."""
    samples, verdicts = Recorder(), Recorder()

    async def run() -> float:
        expected = Expected()
        first: Grouped[int, int] = Grouped(samples, linger_s=30.0, expected=expected)
        second: Grouped[int, int] = Grouped(verdicts, linger_s=30.0, expected=expected)
        loop = asyncio.get_running_loop()
        started = loop.time()

        async def calling() -> None:
            with expected.coming():
                await asyncio.sleep(0.05)

        await asyncio.gather(first.submit(1), second.submit(2), calling())
        return loop.time() - started

    assert asyncio.run(run()) < 5.0
    assert (samples.groups, verdicts.groups) == ([[1]], [[2]])
