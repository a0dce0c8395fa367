"""The processes that measure heuristics (worker.heuristic_pool): a pattern or a function that
runs on is stopped at the judge's timeout_s while this process's threads run on; the worker
decides which callables may run, whatever loading checked; a measure sees none of the
worker's keys and cannot forge its reply."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from typing import Any

import pytest

from jury.schemas.batch import Dimension, Item, Judge
from jury.schemas.results import CellSample
from jury.worker.judging.heuristic_pool import HeuristicPool
from jury.worker.judging.heuristics import measure
from tests.heuristic_functions import ticking

FNS = "tests.heuristic_functions"
RELEVANCE = Dimension.model_validate("relevance")
# 28 word characters and a `!`: Python's `re` backtracks for minutes on `^(\w+\s?)*$`.
BOMB_TEXT = "a" * 28 + "!"
ITEM = Item(id="q1", input="How do I reset my password?", output=BOMB_TEXT)


@pytest.fixture(scope="module")
def pool() -> Iterator[HeuristicPool]:
    started = HeuristicPool([FNS], size=2, memory_mib=1024)
    yield started
    started.close()


def measured(pool: HeuristicPool, heuristic: dict[str, Any], text: str = BOMB_TEXT) -> CellSample:
    judge = Judge.model_validate({"name": "h", "heuristic": heuristic, "timeout_s": 1})
    item = ITEM.model_copy(update={"output": text})
    (sample,) = asyncio.run(measure(judge, item, [RELEVANCE], [None], 0, pool))
    return sample


def test_a_catastrophic_pattern_answers_at_once(pool: HeuristicPool) -> None:
    started = time.perf_counter()
    sample = measured(pool, {"kind": "regex", "pattern": r"^(\w+\s?)*$"}, "a" * 100_000 + "!")
    assert time.perf_counter() - started < 5  # the process's start included; RE2 is linear
    assert (sample.result.score, sample.result.reasoning) == (1.0, "the pattern does not match")


def test_a_gil_holding_callable_is_stopped_while_this_process_runs_on(
    pool: HeuristicPool,
) -> None:
    with ticking() as ticks:
        started = time.perf_counter()
        for function in ("backtracks", "spins"):
            sample = measured(pool, {"kind": "callable", "function": f"{FNS}:{function}"})
            assert sample.result.error_kind == "heuristic_timeout", sample.result
            assert "timeout_s of 1 s: the measure was stopped" in (sample.result.error or "")
        elapsed = time.perf_counter() - started
    assert elapsed < 8  # two deadlines of 1 s, and a new process's start after each kill
    assert max(b - a for a, b in itertools.pairwise(ticks)) < 0.5
    # The pool goes on with a new process after each kill.
    again = measured(pool, {"kind": "callable", "function": f"{FNS}:mentions_input"})
    assert again.result.score == 1.0  # "password" is not in the output: unit 0 → 1 on 1..5


@pytest.mark.parametrize(
    ("function", "says"),
    [
        ("os:system", "comes from os, a module no callable heuristic may come from"),
        ("subprocess:run", "comes from subprocess"),
        ("builtins:eval", "comes from builtins"),
        ("shutil:rmtree", "comes from shutil"),
        (f"{FNS}:re.match", "is defined in re, which JURY_HEURISTIC_CALLABLES does not allow"),
        (f"{FNS}:time.sleep", "is defined in time"),
        ("tests.unallowed_heuristics:leaves_a_mark", "not in a module that"),
    ],
)
def test_the_worker_refuses_what_the_setting_does_not_allow(
    pool: HeuristicPool, function: str, says: str
) -> None:
    # Nothing checked these before the worker: it decides alone, before importing anything.
    sample = measured(pool, {"kind": "callable", "function": function})
    assert sample.result.score is None
    assert sample.result.error_kind == "heuristic_refused"
    assert says in (sample.result.error or "")


def test_callables_are_off_unless_the_operator_allows_them() -> None:
    off = HeuristicPool([], size=1, memory_mib=1024)
    try:
        sample = measured(off, {"kind": "callable", "function": f"{FNS}:mentions_input"})
    finally:
        off.close()
    assert sample.result.error_kind == "heuristic_refused"
    assert "callable heuristics are off" in (sample.result.error or "")
    assert "JURY_HEURISTIC_CALLABLES" in (sample.result.error or "")


def test_a_measure_sees_no_key_and_cannot_forge_its_reply(
    pool: HeuristicPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-heuristics")
    fresh = HeuristicPool([FNS], size=1, memory_mib=1024)  # started with the key set
    try:
        keyless = measured(fresh, {"kind": "callable", "function": f"{FNS}:sees_a_key"})
        printed = measured(fresh, {"kind": "callable", "function": f"{FNS}:prints"})
    finally:
        fresh.close()
    assert keyless.result.score == 1.0  # 0: no OPENAI_API_KEY in its environment
    assert printed.result.score == 3.0  # 0.5 on 1..5: the printed line went to stderr
