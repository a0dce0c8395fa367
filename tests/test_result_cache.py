"""Result caching with real parts: a re-run of a batch through real workers and the simulator
makes no judge call and stores the same records; samples of a cell stay distinct draws;
failed samples are asked again; `cache: false` calls again. And the cache table itself on
SQLite and PostgreSQL."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from bench.common import simulator_stats
from producer.services import ManagedProcess
from schemas.settings import Settings
from schemas.tasks import CellRef
from store.cache import (
    CachedAnswer,
    count_cached_answers,
    find_cached_answer,
    forget_cached_answers,
    store_cached_answer,
)
from store.cells import iter_verdicts, list_samples
from store.engine import session_factory
from store.repository import batch_status
from tests.test_pipeline import ITEMS, run_batch, write_batch

pytestmark = pytest.mark.integration

BROKEN = "openai/balanced@broken"  # the test simulator answers 503 to it, always
CELLS = len(ITEMS) * 2  # write_batch judges every item on two dimensions


def answered(simulator: ManagedProcess, persona: str, status: str) -> int:
    models = simulator_stats(simulator)["models"]
    assert isinstance(models, dict)
    return int(models.get(persona, {}).get(status, 0))


def test_the_cache_table_keeps_one_answer_per_key(database_url: str) -> None:
    sessions = session_factory(database_url)
    # Keys and models of this test alone: the database may hold other tests' answers.
    unique = secrets.token_hex(8)
    a, b, c = (f"{letter * 48}{unique}" for letter in "abc")
    x, y = f"openai/x{unique}", f"openai/y{unique}"
    first = CachedAnswer(4.0, "Relevant.", 100, 12, 0.003)
    assert store_cached_answer(sessions, a, x, first)
    # The same call answered twice at once: the first answer stays, the second is ignored.
    assert not store_cached_answer(sessions, a, x, CachedAnswer(2, None, 1, 1, 0))
    assert find_cached_answer(sessions, a) == first
    assert find_cached_answer(sessions, b) is None
    before = count_cached_answers(sessions)
    assert store_cached_answer(sessions, c, y, CachedAnswer(1, None, 0, 0, 0))
    assert count_cached_answers(sessions) == before + 1
    assert count_cached_answers(sessions, x) == count_cached_answers(sessions, y) == 1
    assert forget_cached_answers(sessions, x) == 1
    assert find_cached_answer(sessions, a) is None
    assert count_cached_answers(sessions, y) == 1


def test_a_rerun_makes_no_judge_call_and_stores_the_same_records(
    tmp_path: Path, running_workers: Settings, simulator: ManagedProcess
) -> None:
    settings = running_workers
    persona = f"noisy@cache{secrets.token_hex(4)}"  # counted apart from every other test
    judges = [
        # Our own prices, so that what a run costs is visible (the simulator has none).
        {
            "model": f"openai/{persona}",
            "n": 3,
            "temperature": 1.0,
            "input_cost_per_token": 1e-6,
            "output_cost_per_token": 1e-6,
        },
        {"model": BROKEN, "n": 1},
    ]
    batch = write_batch(tmp_path, simulator, judges)
    sessions = session_factory(settings.database_url)

    broken_before = answered(simulator, "balanced@broken", "503")
    first = run_batch(settings, batch)
    assert answered(simulator, persona, "200") == CELLS * 3
    broken_first = answered(simulator, "balanced@broken", "503") - broken_before
    assert broken_first > 0
    assert count_cached_answers(sessions, f"openai/{persona}") == CELLS * 3  # one per draw
    assert count_cached_answers(sessions, BROKEN) == 0  # failures are never kept

    second = run_batch(settings, batch)
    assert answered(simulator, persona, "200") == CELLS * 3  # not one call more
    # The failed samples were asked again, with as many attempts as the first time.
    broken_second = answered(simulator, "balanced@broken", "503") - broken_before - broken_first
    assert broken_second == broken_first

    first_records = [v.model_dump() for v in iter_verdicts(sessions, first)]
    second_records = [v.model_dump() for v in iter_verdicts(sessions, second)]
    assert len(first_records) == CELLS and second_records == first_records
    # Samples of a cell are distinct draws, cached one by one: with this much noise some cell
    # has samples that differ, and the re-run has the very same ones.
    samples = [r["llm_evaluations"][f"openai/{persona}"]["samples"] for r in first_records]
    assert any(len(set(s)) > 1 for s in samples)

    assert batch_status(sessions, first).cost_usd > 0
    assert batch_status(sessions, second).cost_usd == 0
    for item in ITEMS:
        for dimension in ("relevance", "tone"):
            for batch_id, cached in ((first, False), (second, True)):
                raw = list_samples(sessions, CellRef(batch_id, str(item["id"]), dimension))
                judged = [s for s in raw if s.judge == f"openai/{persona}"]
                assert [s.cached for s in judged] == [cached] * 3
                assert all((s.cost_usd == 0) == cached for s in judged)
                assert [s.cached for s in raw if s.judge == BROKEN] == [False]

    # `cache: false` in the batch file: every call is made again.
    run_batch(settings, write_batch(tmp_path, simulator, judges, cache=False))
    assert answered(simulator, persona, "200") == CELLS * 6
