"""Functions that callable heuristic judges name in tests (`tests.heuristic_functions:...`):
workers run with the repository on their Python path, so they import these too. And
`ticking`, a thread that stands for a worker's heartbeat while a test measures."""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from jury.schemas.batch import Dimension, Item


def mentions_input(item: Item, criterion: Dimension) -> float:
    """1 when the output repeats the input's last word, else 0 (a unit score)."""
    word = (item.input or "").rstrip("?").split()[-1:] or [""]
    return 1.0 if word[0] and word[0].lower() in (item.output or "").lower() else 0.0


def words_on_scale(item: Item, criterion: Dimension) -> float:
    """The output's word count, clipped to the criterion's scale (`returns: scale`)."""
    scale = criterion.resolved_scale
    return float(min(max(len((item.output or "").split()), scale.min), scale.max))


def raises(item: Item, criterion: Dimension) -> float:
    raise RuntimeError(f"cannot measure {item.id}")


def returns_nan(item: Item, criterion: Dimension) -> float:
    return float("nan")


def returns_text(item: Item, criterion: Dimension) -> str:
    return "five"


def returns_too_much(item: Item, criterion: Dimension) -> float:
    return 1.5


NOT_CALLABLE = 3


def sleeps(item: Item, criterion: Dimension) -> float:
    """Slower than the test judge's timeout_s."""
    time.sleep(0.5)
    return 1.0


def backtracks(item: Item, criterion: Dimension) -> float:
    """Python's own `re` backtracking catastrophically, in C, holding the GIL: in a thread,
    it would stall every other thread of its process for ever."""
    text = "a" * 40 + "!"
    return 1.0 if re.match(r"^(\w+\s?)*$", text) else 0.0


def spins(item: Item, criterion: Dimension) -> float:
    """A Python loop that never ends."""
    while True:
        pass


def prints(item: Item, criterion: Dimension) -> float:
    """Writes to standard output, which must not reach the worker's reply."""
    print('{"results": "forged"}')
    return 0.5


def sees_a_key(item: Item, criterion: Dimension) -> float:
    """1 when an OpenAI key is in this process's environment, else 0."""
    return 1.0 if "OPENAI_API_KEY" in os.environ else 0.0


@contextmanager
def ticking() -> Iterator[list[float]]:
    """A thread that needs the GIL every 20 ms, as a worker's heartbeat does."""
    ticks: list[float] = []
    done = threading.Event()

    def tick() -> None:
        while not done.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.02)

    thread = threading.Thread(target=tick)
    thread.start()
    try:
        yield ticks
    finally:
        done.set()
        thread.join()
