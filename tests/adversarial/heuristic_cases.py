"""Hostile heuristic judges: regex bombs, code by import path, and measures that never end.

A batch file can name a pattern and a function; the workers decide what runs and for how
long. Cases that load a batch end with exit 2 and one paragraph; cases that measure go
through a real HeuristicPool (processes started and killed as on a worker) and check the
deadline holds while this process's own threads run on.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path
from typing import Any

from jury.schemas.batch import Dimension, Item, Judge
from jury.schemas.results import SampleResult
from jury.worker.judging.heuristic_pool import HeuristicPool
from jury.worker.judging.heuristics import measure
from tests.adversarial.cases import case, refused, write
from tests.heuristic_functions import ticking

FNS = "tests.heuristic_functions"
ALLOW = {"JURY_HEURISTIC_CALLABLES": FNS}
RELEVANCE = Dimension.model_validate("relevance")


def heuristic_batch(folder: Path, heuristic: str) -> Path:
    return write(
        folder,
        "b.yaml",
        f"judges: [{{name: h, heuristic: {heuristic}}}]\ndimensions: [relevance]\n"
        "items: [{id: a, output: x}]\n",
    )


def load_refused(
    folder: Path, heuristic: str, *needles: str, env: dict[str, str] | None = None
) -> None:
    refused(["submit", str(heuristic_batch(folder, heuristic)), "--dry-run"], *needles, env=env)


def measured(
    heuristic: dict[str, Any], output: str, timeout_s: float = 1
) -> tuple[SampleResult, float]:
    """The sample a worker's pool measures, with the longest pause of a GIL-needing thread."""
    judge = Judge.model_validate({"name": "h", "heuristic": heuristic, "timeout_s": timeout_s})
    item = Item(id="a", input="q", output=output)
    pool = HeuristicPool([FNS], size=1, memory_mib=1024)
    try:
        with ticking() as ticks:
            (sample,) = asyncio.run(measure(judge, item, [RELEVANCE], [None], 0, pool))
    finally:
        pool.close()
    pause = max((b - a for a, b in itertools.pairwise(ticks)), default=0.0)
    assert pause < 0.5, f"a thread of this process waited {pause:.2f} s"
    return sample.result, pause


# --- regex bombs -------------------------------------------------------------------------------


@case("heuristics", "answered at once: ^(\\w+\\s?)*$ against 200,000 word characters and a !")
def regex_bomb_answers_at_once(folder: Path) -> None:
    started = time.perf_counter()
    result, _ = measured({"kind": "regex", "pattern": r"^(\w+\s?)*$"}, "a" * 200_000 + "!")
    assert (result.score, result.reasoning) == (1.0, "the pattern does not match"), result
    assert time.perf_counter() - started < 5


@case("heuristics", "answered at once: nested quantifiers (a|aa)*b and (x+x+)+y")
def regex_nested_quantifiers(folder: Path) -> None:
    for pattern in (r"^(a|aa)*b$", r"(x+x+)+y", r"^(([a-z])+.)+[A-Z]([a-z])+$"):
        result, _ = measured({"kind": "regex", "pattern": pattern}, "a" * 5000 + "x" * 5000)
        assert result.score == 1.0, (pattern, result)


@case("heuristics", "heuristic_timeout: a quadratic count is stopped at timeout_s")
def regex_quadratic_count(folder: Path) -> None:
    heuristic = {"kind": "regex", "pattern": "a(.*z)?", "mode": "count", "count_max": 1_000_000}
    started = time.perf_counter()
    result, _ = measured(heuristic, "a" * 400_000)
    assert result.error_kind == "heuristic_timeout", result
    assert time.perf_counter() - started < 6


@case("heuristics", "exit 2: a backreference is refused at load, naming RE2")
def regex_backreference(folder: Path) -> None:
    load_refused(folder, r"{kind: regex, pattern: '^(a+)+\1$'}", "RE2", "no backreferences")


@case("heuristics", "exit 2: lookahead and lookbehind are refused at load")
def regex_lookaround(folder: Path) -> None:
    load_refused(folder, "{kind: regex, pattern: '(?=(a+))+b'}", "no lookaround")
    load_refused(folder, "{kind: regex, pattern: '(?<!x)y'}", "invalid perl operator")


@case("heuristics", "exit 2: a pattern that would compile to gigabytes is refused")
def regex_huge_program(folder: Path) -> None:
    load_refused(folder, "{kind: regex, pattern: '((a{100}){100}){100}'}", "RE2")


@case("heuristics", "exit 2: a pattern of 100,000 characters")
def regex_huge_pattern(folder: Path) -> None:
    load_refused(folder, "{kind: regex, pattern: '" + "a" * 100_000 + "'}", "2000 characters")


# --- callables: code by import path ----------------------------------------------------------


@case("heuristics", "exit 2: callables are off unless the operator allows them")
def callable_off_by_default(folder: Path) -> None:
    load_refused(
        folder,
        f"{{kind: callable, function: '{FNS}:mentions_input'}}",
        "callable heuristics are off",
        "JURY_HEURISTIC_CALLABLES",
    )


@case("heuristics", "exit 2: os:system, subprocess:run, builtins:eval, shutil:rmtree refused")
def callable_dangerous_modules(folder: Path) -> None:
    for path in ("os:system", "subprocess:run", "builtins:eval", "shutil:rmtree", "posix:system"):
        load_refused(folder, f"{{kind: callable, function: '{path}'}}", path, env=ALLOW)


@case("heuristics", "exit 2: an allowed module's attribute leading to os.system is refused")
def callable_attribute_escape(folder: Path) -> None:
    for path, says in [
        (f"{FNS}:os.system", "defined in posix"),
        (f"{FNS}:re.compile", "defined in re"),
        (f"{FNS}:__builtins__", "dunder"),
        (f"{FNS}:Item.__init__.__globals__", "dunder"),
    ]:
        load_refused(folder, f"{{kind: callable, function: '{path}'}}", says, env=ALLOW)


@case("heuristics", "exit 2: a setting that names os (or jury) is a configuration error")
def callable_setting_names_os(folder: Path) -> None:
    batch = heuristic_batch(folder, f"{{kind: callable, function: '{FNS}:mentions_input'}}")
    for prefix in ("os", "subprocess", "jury", "_thread"):
        env = {"JURY_HEURISTIC_CALLABLES": f"{FNS},{prefix}"}
        refused(["submit", str(batch), "--dry-run"], "heuristic_callables", prefix, env=env)


@case("heuristics", "exit 2: an invisible character in an import path")
def callable_invisible_character(folder: Path) -> None:
    load_refused(
        folder,
        f'{{kind: callable, function: "{FNS}:mentions\\u200binput"}}',
        "must be an import path",
        env=ALLOW,
    )


@case("heuristics", "heuristic_timeout: a callable stuck in C holding the GIL is killed")
def callable_holds_the_gil(folder: Path) -> None:
    started = time.perf_counter()
    result, _ = measured({"kind": "callable", "function": f"{FNS}:backtracks"}, "x")
    assert result.error_kind == "heuristic_timeout", result
    assert time.perf_counter() - started < 6


@case("heuristics", "heuristic_timeout: a callable that loops for ever is killed")
def callable_loops(folder: Path) -> None:
    result, _ = measured({"kind": "callable", "function": f"{FNS}:spins"}, "x", timeout_s=0.5)
    assert result.error_kind == "heuristic_timeout", result


@case("heuristics", "a callable's print cannot forge its reply")
def callable_prints_a_reply(folder: Path) -> None:
    result, _ = measured({"kind": "callable", "function": f"{FNS}:prints"}, "x")
    assert result.score == 3.0, result


@case("heuristics", "heuristic_refused on the worker: callables its setting does not allow")
def callable_refused_by_the_worker(folder: Path) -> None:
    # Nothing checked these before: the worker's pool decides alone.
    for path in ("os:system", "tests.unallowed_heuristics:leaves_a_mark", f"{FNS}:time.sleep"):
        result, _ = measured({"kind": "callable", "function": path}, "x")
        assert result.error_kind == "heuristic_refused", (path, result)
