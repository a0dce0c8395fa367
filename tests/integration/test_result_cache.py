"""Result caching with real parts: a re-run of a batch through real workers and the simulator
makes no judge call and stores the same records; samples of a cell stay distinct draws;
failed samples are asked again; `cache: false` calls again. And the cache table itself on
SQLite and PostgreSQL."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest
from click.testing import CliRunner

from bench.common import simulator_stats
from jury.cli.main import jury
from jury.local.services import ManagedProcess
from jury.schemas.batch import Judge
from jury.schemas.pairwise import PairJudgment
from jury.schemas.results import CellSample, SampleResult
from jury.schemas.status import BatchState
from jury.schemas.tasks import CellRef
from jury.settings import Settings
from jury.store.cache import (
    CacheEntry,
    count_cached_answers,
    find_cached_answer,
    forget_cached_answers,
    store_cached_answer,
)
from jury.store.cells import iter_verdicts
from jury.store.engine import session_factory
from jury.store.repository import batch_status
from jury.store.samples import list_samples
from jury.worker.judging.result_cache import COLD_RECHECK_S, ResultCache
from tests.integration.test_pipeline import ITEMS, run_batch, write_batch

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

    def answer(score: float, pair: PairJudgment | None = None) -> tuple[CellSample, ...]:
        result = SampleResult(judge="j", sample=0, score=score, cost_usd=0.003)
        return (
            CellSample(dimension="relevance", result=result, pair=pair),
            CellSample(dimension="tone", result=result.model_copy(update={"score": 7.0})),
        )

    first = answer(1.5, PairJudgment(4, 2, 3, 2))
    assert store_cached_answer(sessions, CacheEntry(a, x, first))
    # The same call answered twice at once: the first answer stays, the second is ignored.
    assert not store_cached_answer(sessions, CacheEntry(a, x, answer(2)))
    assert find_cached_answer(sessions, a) == list(first)
    assert find_cached_answer(sessions, b) is None
    before = count_cached_answers(sessions)
    assert store_cached_answer(sessions, CacheEntry(c, y, answer(1)))
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
    first = run_batch(settings, batch, ends=BatchState.DEGRADED)
    assert answered(simulator, persona, "200") == CELLS * 3
    broken_first = answered(simulator, "balanced@broken", "503") - broken_before
    assert broken_first > 0
    assert count_cached_answers(sessions, f"openai/{persona}") == CELLS * 3  # one per draw
    assert count_cached_answers(sessions, BROKEN) == 0  # failures are never kept

    second = run_batch(settings, batch, ends=BatchState.DEGRADED)
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
    # The re-run says where its answers came from: `jury status` and the end-of-batch line.
    told = f"{CELLS * 3} from the cache"
    for command in ("status", "results"):
        shown = CliRunner().invoke(jury, [command, second], env=settings.to_env()).output
        assert told in " ".join(shown.split()), shown
        first_shown = CliRunner().invoke(jury, [command, first], env=settings.to_env()).output
        assert "from the cache" not in first_shown
    for item in ITEMS:
        for dimension in ("relevance", "tone"):
            for batch_id, cached in ((first, False), (second, True)):
                raw = list_samples(sessions, CellRef(batch_id, str(item["id"]), dimension))
                judged = [s for s in raw if s.judge == f"openai/{persona}"]
                assert [s.cached for s in judged] == [cached] * 3
                assert all((s.cost_usd == 0) == cached for s in judged)
                assert [s.cached for s in raw if s.judge == BROKEN] == [False]

    # `cache: false` in the batch file: every call is made again.
    run_batch(
        settings,
        write_batch(tmp_path, simulator, judges, cache=False),
        ends=BatchState.DEGRADED,
    )
    assert answered(simulator, persona, "200") == CELLS * 6


PAIRS = [
    {"id": f"pair-{i}", "input": f"Question {i}?", "output_a": f"Answer {i}.", "output_b": "No."}
    for i in range(3)
]


@pytest.mark.parametrize("mode", ["combined", "pairwise", "combined-pairwise"])
def test_every_mode_reruns_from_the_cache(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess, mode: str
) -> None:
    """Combined and pairwise tasks take the one pipeline's result cache too."""
    persona = f"noisy@c{mode[:4]}{secrets.token_hex(3)}"
    judges = [{"model": f"openai/{persona}", "n": 2, "temperature": 1.0}]
    extra: dict[str, object] = {}
    if "combined" in mode:
        extra["mode"] = "combined"
    if "pairwise" in mode:
        extra["pairwise"] = {}
    batch = write_batch(tmp_path, simulator, judges, **extra)
    if "pairwise" in mode:
        (tmp_path / "items.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PAIRS))
    sessions = session_factory(sqlite_workers.database_url)
    first = run_batch(sqlite_workers, batch)
    calls = answered(simulator, persona, "200")
    items = len(PAIRS) if "pairwise" in mode else len(ITEMS)
    per_task = 2 if "pairwise" in mode else 1
    tasks = items * 2 * (1 if "combined" in mode else 2)  # 2 samples; 2 dimensions
    assert calls == tasks * per_task
    second = run_batch(sqlite_workers, batch)
    assert answered(simulator, persona, "200") == calls  # not one call more
    first_records = [v.model_dump() for v in iter_verdicts(sessions, first)]
    assert [v.model_dump() for v in iter_verdicts(sessions, second)] == first_records
    if "pairwise" in mode:
        assert all(r["pairwise"]["n_judgments"] == 2 for r in first_records)
    for record in first_records:
        cell = CellRef(second, record["item_id"], record["criterion_id"])
        assert [s.cached for s in list_samples(sessions, cell)] == [True, True]


def test_a_model_without_kept_answers_is_not_looked_up(tmp_path: Path) -> None:
    """A first run costs no cache lookup per task: the model's absence is remembered, looked
    at again after COLD_RECHECK_S, and forgotten as soon as an answer of it is kept."""
    sessions = session_factory(f"sqlite:///{tmp_path / 'cache.db'}")
    now = [0.0]
    cache = ResultCache(sessions, clock=lambda: now[0])
    model = f"openai/cold{secrets.token_hex(3)}"
    assert not cache.worth_looking(model)
    result = SampleResult(judge="j", sample=0, score=3.0)
    entry = CacheEntry("k" * 64, model, (CellSample(dimension="relevance", result=result),))
    store_cached_answer(sessions, entry)  # kept by another process
    assert not cache.worth_looking(model)  # remembered as cold
    now[0] += COLD_RECHECK_S + 1
    assert cache.worth_looking(model)  # looked at again
    other = f"openai/kept{secrets.token_hex(3)}"
    assert not cache.worth_looking(other)
    cache.entry("k" * 64, Judge(model=other), [CellSample(dimension="relevance", result=result)])
    assert cache.worth_looking(other)  # this process keeps its answers: a re-run will look
