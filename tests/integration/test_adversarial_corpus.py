"""The adversarial corpus (tests/adversarial): every case gets what the user should get, within
its memory and time ceilings, and refused input enqueues and records nothing. Each class runs
in one process of its own (tests.adversarial.runner), under an address-space limit."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

import tests.adversarial.bound_cases
import tests.adversarial.heuristic_cases
import tests.adversarial.input_cases
import tests.adversarial.provider_cases  # noqa: F401 (registers the cases)
from jury.settings import Settings
from tests.adversarial.cases import CASES, Case
from tests.conftest import ROOT, queued_messages

CLASSES = sorted({c.klass for c in CASES})
ClassResults = Callable[[str], dict[str, dict[str, Any]]]


def _params() -> list[Any]:
    return [
        pytest.param(
            c,
            id=f"{c.klass}-{c.name}",
            marks=[pytest.mark.xfail(strict=False, reason=c.xfail)] if c.xfail else [],
        )
        for c in CASES
    ]


@pytest.fixture(scope="module")
def class_results(tmp_path_factory: pytest.TempPathFactory, redis_url: str) -> ClassResults:
    """Runs a class's cases once (in a process of its own) and returns their results by name;
    then checks that nothing was enqueued or recorded."""
    cache: dict[str, dict[str, dict[str, Any]]] = {}

    def run(klass: str) -> dict[str, dict[str, Any]]:
        if klass in cache:
            return cache[klass]
        folder = tmp_path_factory.mktemp(f"corpus-{klass}")
        results = folder / "results.jsonl"
        settings = Settings(broker_url=redis_url, queue=f"jury-corpus-{secrets.token_hex(4)}")
        env = {
            **_clean_env(),
            "JURY_BROKER_URL": redis_url,
            "JURY_QUEUE": settings.queue,
            "JURY_DATABASE_URL": f"sqlite:///{folder / 'jury.db'}",
        }
        budget = sum(c.max_s for c in CASES if c.klass == klass) + 60
        with contextlib.suppress(subprocess.TimeoutExpired):  # cases without a result hung
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "tests.adversarial.runner",
                    klass,
                    str(results),
                    str(folder),
                ],
                cwd=ROOT,
                env=env,
                timeout=budget,
                check=False,
            )
        lines = results.read_text().splitlines() if results.exists() else []
        cache[klass] = {r["name"]: r for r in map(json.loads, lines)}
        assert queued_messages(settings) == [], f"class {klass} enqueued judge tasks"
        assert not (folder / "jury.db").exists(), f"class {klass} recorded a batch"
        return cache[klass]

    return run


def _clean_env() -> dict[str, str]:
    # The egress policy lets the cases reach their simulator, on loopback.
    return {k: v for k, v in os.environ.items() if not k.startswith("JURY_")} | {
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "JURY_EGRESS_ALLOW": "loopback",
    }


def test_the_corpus_covers_every_class_with_eighty_cases_or_more() -> None:
    counts = Counter(c.klass for c in CASES)
    assert set(counts) == {
        "bounds",
        "heuristics",
        "names",
        "placeholders",
        "provider",
        "resources",
        "scores",
        "terminal",
    }
    assert sum(counts.values()) >= 80, counts
    assert len({c.name for c in CASES}) == len(CASES), "case names are unique"


@pytest.mark.parametrize("case", _params())
def test_case(case: Case, class_results: ClassResults) -> None:
    result = class_results(case.klass).get(case.name)
    assert result is not None, f"{case.name}: no result: its process crashed or hung on it"
    assert result["ok"], f"{case.name} (expected: {case.expect}): {result['detail']}"
    assert result["peak_mib"] <= case.max_mib, f"{result['peak_mib']:.1f} MiB > {case.max_mib}"
    # The ceiling is on this process's CPU time; the wall clock, which a loaded machine (or
    # the other test processes) stretches, gets three times as long: a case that waits for
    # ever still fails, one that merely waited for the CPU does not.
    cpu, wall = result["cpu_seconds"], result["seconds"]
    assert cpu <= case.max_s, f"{cpu:.1f} s of CPU > {case.max_s}"
    assert wall <= 3 * case.max_s, f"{wall:.1f} s > 3 × {case.max_s}"
