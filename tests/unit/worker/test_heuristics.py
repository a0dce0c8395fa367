"""Heuristic judges (schemas.heuristics, worker.heuristics): each kind's score on the
criterion's scale, a pair measured side by side, and every bad input refused or failed with
its own error kind. Callables run only from the module prefixes the operator allows
(JURY_HEURISTIC_CALLABLES); these tests allow tests.heuristic_functions."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from jury.batchfile.loading import load_batch
from jury.batchfile.planning import budget_problems, plan_batch
from jury.errors import BatchFileError, ConfigurationError
from jury.schemas.batch import BatchConfig, Dimension, Item, Judge
from jury.schemas.heuristics import heuristic_problems
from jury.schemas.results import CellSample
from jury.worker.judging.heuristic_pool import HeuristicPool
from jury.worker.judging.heuristic_scores import heuristic_score
from jury.worker.judging.heuristics import heuristic_samples, measure

FNS = "tests.heuristic_functions"
ALLOWED = [FNS]
RELEVANCE = Dimension.model_validate("relevance")  # built-in, 1..5
TEN = Dimension(name="tone", description="Is it kind?", scale={"min": 1, "max": 10})
ITEM = Item(id="q1", input="How do I reset my password?", output="Open Settings, then Password.")


def judge(**heuristic: Any) -> Judge:
    return Judge.model_validate({"name": "h", "heuristic": heuristic})


def score(j: Judge, text: str, dimension: Dimension = RELEVANCE) -> float:
    item = ITEM.model_copy(update={"output": text})
    return heuristic_score(j, item, text, dimension, ALLOWED)[0]


def test_defaults_name_the_heuristic_and_take_one_sample() -> None:
    j = Judge.model_validate({"heuristic": {"kind": "keyword", "keywords": ["x"]}})
    assert (j.model, j.name, j.n) == ("heuristic/keyword", "heuristic/keyword", 1)
    assert judge(kind="length", max=3).n == 1
    assert Judge.model_validate({"heuristic": {"kind": "length", "max": 3}, "n": 2}).n == 2


def test_length_in_words_and_characters() -> None:
    words = judge(kind="length", min=2, max=4)
    assert score(words, "one two three") == 5.0  # inside: the top of 1..5
    assert score(words, "one") == 1.0
    assert score(words, "one two three four five") == 1.0
    chars = judge(kind="length", unit="characters", max=5)
    assert score(chars, "abcde", TEN) == 10.0
    assert score(chars, "abcdef", TEN) == 1.0
    assert heuristic_score(words, ITEM, "a b c", RELEVANCE)[1] == "3 words, within 2..4"


def test_regex_match_no_match_and_count() -> None:
    assert score(judge(kind="regex", pattern=r"\d+"), "call 555") == 5.0
    assert score(judge(kind="regex", pattern=r"\d+"), "no digits") == 1.0
    assert score(judge(kind="regex", pattern="sorry", mode="no_match"), "Sorry!") == 5.0
    assert score(judge(kind="regex", pattern="sorry", ignore_case=True), "Sorry!") == 5.0
    counted = judge(kind="regex", pattern=r"\bstep\b", mode="count", count_max=4)
    assert score(counted, "step, step") == pytest.approx(1 + 0.5 * 4)  # 2 of 4 → half way
    assert score(counted, "step " * 9) == 5.0  # capped


def test_keyword_share_case_insensitive_by_default() -> None:
    k = judge(kind="keyword", keywords=["settings", "password", "email"])
    assert score(k, "Open SETTINGS, then Password.", TEN) == pytest.approx(1 + 9 * 2 / 3)
    exact = judge(kind="keyword", keywords=["settings", "password"], case_sensitive=True)
    assert score(exact, "Open SETTINGS, then password.") == pytest.approx(3.0)


def test_callable_unit_and_scale() -> None:
    unit = judge(kind="callable", function=f"{FNS}:mentions_input")
    assert heuristic_score(unit, ITEM, "Reset your password here.", TEN, ALLOWED)[0] == 10.0
    assert heuristic_score(unit, ITEM, "No idea.", TEN, ALLOWED)[0] == 1.0
    on_scale = judge(kind="callable", function=f"{FNS}:words_on_scale", returns="scale")
    assert heuristic_score(on_scale, ITEM, "one two three", TEN, ALLOWED)[0] == 3.0


@pytest.mark.parametrize(
    ("function", "kind", "says"),
    [
        ("raises", "heuristic_raised", "RuntimeError: cannot measure q1"),
        ("returns_nan", "heuristic_value", "returned nan"),
        ("returns_text", "heuristic_value", "returned a str, not a number"),
        ("returns_too_much", "heuristic_value", "outside 0..1"),
        ("missing_function", "heuristic_import", "cannot import"),
        ("NOT_CALLABLE", "heuristic_import", "is not callable"),
    ],
)
def test_a_bad_callable_gives_a_failed_sample(function: str, kind: str, says: str) -> None:
    j = judge(kind="callable", function=f"{FNS}:{function}")
    (sample,) = heuristic_samples(j, ITEM, [RELEVANCE], [None], 0, ALLOWED)
    assert sample.result.score is None
    assert sample.result.error_kind == kind
    assert says in (sample.result.error or "")
    assert sample.result.cost_usd == 0 and sample.result.prompt_tokens == 0


def test_a_missing_module_is_refused_at_load() -> None:
    (problem,) = heuristic_problems(
        judge(kind="callable", function="no_such_module_7f3a:score").heuristic,  # type: ignore[arg-type]
        "judges[1]",
        ["no_such_module_7f3a"],
    )
    assert problem.startswith("judges[1].heuristic.function: cannot import no_such_module_7f3a")
    assert heuristic_problems(judge(kind="length", max=3).heuristic, "j", []) == []  # type: ignore[arg-type]


def test_a_pair_is_measured_side_by_side_in_one_order() -> None:
    pair = Item(id="p", output_a="one two three", output_b="one two three four five six")
    j = judge(kind="length", max=4)
    (sample,) = heuristic_samples(j, pair, [RELEVANCE], ["AB", "BA"], 2)
    assert sample.pair is not None
    assert (sample.pair.a_first_a, sample.pair.a_first_b, sample.pair.b_first_a) == (5, 1, None)
    assert sample.result.score == 4.0 and sample.result.sample == 2
    assert sample.result.reasoning == "A: 3 words, within 0..4 | B: 6 words, outside 0..4"


def test_combined_measures_every_dimension_on_its_scale() -> None:
    samples = heuristic_samples(
        judge(kind="regex", pattern="Password"), ITEM, [RELEVANCE, TEN], [None], 0
    )
    assert [(s.dimension, s.result.score) for s in samples] == [("relevance", 5.0), ("tone", 10.0)]


@pytest.mark.parametrize(
    ("heuristic", "says"),
    [
        ({"kind": "sentiment"}, "does not match any of the expected tags"),
        ({"kind": "regex", "pattern": "(unclosed"}, "cannot be compiled by RE2"),
        ({"kind": "regex", "pattern": r"(a+)\1"}, "no backreferences"),
        ({"kind": "regex", "pattern": "sorry(?! not)"}, "no lookaround"),
        ({"kind": "regex", "pattern": "(a{1000}){1000}"}, "invalid repetition size"),
        ({"kind": "callable", "function": "m:__builtins__.eval"}, "dunder"),
        ({"kind": "length"}, "needs `min`, `max` or both"),
        ({"kind": "length", "min": 5, "max": 2}, "must not exceed max"),
        ({"kind": "keyword", "keywords": []}, "at least 1 item"),
        ({"kind": "callable", "function": "os.system"}, "must be an import path"),
        ({"kind": "callable", "function": "m:f; rm -rf /"}, "must be an import path"),
        ({"kind": "length", "max": 3, "shape": 1}, "Extra inputs are not permitted"),
    ],
)
def test_bad_heuristics_are_refused(heuristic: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError) as info:
        Judge.model_validate({"heuristic": heuristic})
    assert says in str(info.value)


def test_a_heuristic_has_no_batch_api_and_sits_in_a_panel() -> None:
    with pytest.raises(ValidationError, match="makes no LLM call"):
        Judge.model_validate({"heuristic": {"kind": "length", "max": 3}, "batch_api": True})
    config = BatchConfig.model_validate(
        {
            "judges": [
                "openai/gpt-4o-mini",
                {"name": "short", "heuristic": {"kind": "length", "max": 50}},
                {"name": "polite", "heuristic": {"kind": "keyword", "keywords": ["please"]}},
            ],
            "dimensions": ["relevance"],
        }
    )
    assert config.samples_per_cell == 3 + 1 + 1
    assert config.judge("short").heuristic is not None


def test_load_refuses_a_bad_import_path_and_an_unknown_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JURY_HEURISTIC_CALLABLES", FNS)
    batch = tmp_path / "batch.yaml"
    batch.write_text(
        "judges:\n"
        "- {name: fn, heuristic: {kind: callable, function: 'tests.heuristic_functions:nope'}}\n"
        "- {name: odd, heuristic: {kind: vibes}}\n"
        "dimensions: [relevance]\nitems: [{id: a, output: x}]\n"
    )
    with pytest.raises(BatchFileError) as info:
        load_batch(batch)
    (problem,) = info.value.problems  # the unknown kind alone: no missing `model`
    assert problem.startswith("judges[1].heuristic: Input tag 'vibes'")
    batch.write_text(batch.read_text().replace("- {name: odd, heuristic: {kind: vibes}}\n", ""))
    with pytest.raises(BatchFileError) as info:
        load_batch(batch)
    message = str(info.value)
    assert "judges[0].heuristic.function: cannot import tests.heuristic_functions:nope" in message
    assert "AttributeError" in message and "Traceback" not in message


def test_the_plan_counts_no_call_and_no_cost_for_a_heuristic() -> None:
    config = BatchConfig.model_validate(
        {
            "judges": [{"name": "short", "heuristic": {"kind": "length", "max": 50}}],
            "dimensions": ["relevance"],
            "max_cost_usd": 1,  # a heuristic's price is known: zero
        }
    )
    assert budget_problems(config) == []
    (planned,) = plan_batch(config, n_items=10, item_text_chars=5000).judges
    assert (planned.calls, planned.prompt_tokens, planned.cost_usd) == (0, 0, 0.0)


def test_measure_stops_a_slow_callable_at_the_judges_timeout() -> None:
    pool = HeuristicPool(ALLOWED, size=1, memory_mib=1024)
    quick = judge(kind="length", max=50)
    slow = Judge.model_validate(
        {"heuristic": {"kind": "callable", "function": f"{FNS}:sleeps"}, "timeout_s": 0.1}
    )

    async def timed() -> tuple[list[CellSample], list[CellSample], float]:
        (first,) = await measure(quick, ITEM, [RELEVANCE], [None], 0, pool)  # starts the process
        started = time.perf_counter()
        found = await measure(slow, ITEM, [RELEVANCE, TEN], [None], 3, pool)
        return [first], found, time.perf_counter() - started

    try:
        (quick_sample,), samples, waited = asyncio.run(timed())
    finally:
        pool.close()
    assert quick_sample.result.score == 5.0
    assert waited < 0.45  # the callable sleeps 0.5 s: it was stopped, not waited for
    assert [(s.dimension, s.result.error_kind, s.result.sample) for s in samples] == [
        ("relevance", "heuristic_timeout", 3),
        ("tone", "heuristic_timeout", 3),
    ]
    assert "timeout_s of 0.1 s" in (samples[0].result.error or "")


def callable_batch(tmp_path: Path, function: str) -> Path:
    batch = tmp_path / "batch.yaml"
    batch.write_text(
        f"judges:\n- {{name: fn, heuristic: {{kind: callable, function: '{function}'}}}}\n"
        "dimensions: [relevance]\nitems: [{id: a, output: x}]\n"
    )
    return batch


def test_callables_are_off_at_load_unless_the_operator_allows_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JURY_HEURISTIC_CALLABLES", raising=False)
    with pytest.raises(BatchFileError) as info:
        load_batch(callable_batch(tmp_path, f"{FNS}:mentions_input"))
    (problem,) = info.value.problems
    assert "callable heuristics are off" in problem and "JURY_HEURISTIC_CALLABLES" in problem
    monkeypatch.setenv("JURY_HEURISTIC_CALLABLES", FNS)
    assert load_batch(callable_batch(tmp_path, f"{FNS}:mentions_input")).config.judges


@pytest.mark.parametrize(
    ("function", "says"),
    [
        ("os:system", "comes from os"),
        ("subprocess:run", "comes from subprocess"),
        ("builtins:eval", "comes from builtins"),
        ("shutil:rmtree", "comes from shutil"),
        (f"{FNS}:os.system", "is defined in posix"),
        ("tests.unallowed_heuristics:leaves_a_mark", "not in a module that"),
    ],
)
def test_load_refuses_what_the_setting_does_not_allow_before_importing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, function: str, says: str
) -> None:
    monkeypatch.setenv("JURY_HEURISTIC_CALLABLES", FNS)
    with pytest.raises(BatchFileError) as info:
        load_batch(callable_batch(tmp_path, function))
    (problem,) = info.value.problems
    assert problem.startswith("judges[0].heuristic.function: ") and says in problem
    assert "tests.unallowed_heuristics" not in sys.modules


@pytest.mark.parametrize("prefix", ["os", "os.path", "subprocess", "builtins", "jury", "*", "a b"])
def test_the_setting_never_allows_the_refused_modules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefix: str
) -> None:
    monkeypatch.setenv("JURY_HEURISTIC_CALLABLES", f"{FNS},{prefix}")
    with pytest.raises(ConfigurationError, match="JURY_\\* environment: heuristic_callables"):
        load_batch(callable_batch(tmp_path, f"{FNS}:mentions_input"))
