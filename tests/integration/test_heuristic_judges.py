"""Heuristic judges on a panel beside an LLM judge, end to end: real Redis, the shared
`python -m worker` processes, the simulator over HTTP. The heuristics' samples are what
worker.heuristics measures, cost nothing and call nothing; a callable that raises fails its
own samples (the batch ends degraded) while the rest of the panel gives the verdicts."""

from __future__ import annotations

import itertools
import statistics
from pathlib import Path
from typing import Any, cast

import pytest

from jury.batchfile.loading import load_batch
from jury.broker.keys import heartbeats as heartbeats_key
from jury.broker.redis_client import BrokerRedis
from jury.local.services import ManagedProcess, wait_for
from jury.producer.publishing import create_producer_app, short_task_id
from jury.producer.submission import submit_batch
from jury.schemas.batch import Item
from jury.schemas.status import BatchState
from jury.schemas.tasks import CellRef
from jury.settings import Settings
from jury.store.cells import iter_verdicts
from jury.store.engine import session_factory
from jury.store.repository import batch_status
from jury.store.samples import list_samples, pair_judgments
from jury.worker.judging.heuristic_scores import heuristic_score
from tests.integration.test_faults import assert_exactly_once
from tests.integration.test_modes import PAIRS, TONE, answered, tagged, write_batch
from tests.integration.test_pipeline import run_batch

pytestmark = pytest.mark.integration

FNS = "tests.heuristic_functions"


@pytest.fixture(autouse=True)
def callables_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading checks callables against this process's setting, as the workers do theirs
    (conftest's settings_for allows the same prefix)."""
    monkeypatch.setenv("JURY_HEURISTIC_CALLABLES", FNS)


ITEMS = [
    {"id": "h0", "input": "How do I reset my password?", "output": "Open Settings, then password."},
    {"id": "h1", "input": "Where is the invoice?", "output": "Billing page, top right."},
    {"id": "h2", "input": "Can I export data?", "output": "Yes: Export, choose CSV, then data."},
]
HEURISTICS: list[dict[str, Any]] = [
    {"name": "short", "heuristic": {"kind": "length", "max": 5}},
    {"name": "steps", "heuristic": {"kind": "keyword", "keywords": ["then", "settings", "csv"]}},
    {"name": "echo", "heuristic": {"kind": "callable", "function": f"{FNS}:mentions_input"}},
]


def test_a_mixed_panel_runs_through_the_one_pipeline(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    llm = tagged("balanced", short_task_id().lower().replace("_", "").replace("-", ""))
    broken = {"name": "broken", "heuristic": {"kind": "callable", "function": f"{FNS}:raises"}}
    spec = {
        "judges": [{"model": llm, "n": 2}, *HEURISTICS, broken],
        "dimensions": ["relevance", TONE],
        "items": ITEMS,
    }
    # write_batch gives every judge the simulator's URL: a heuristic judge ignores it.
    path = write_batch(tmp_path, simulator, spec)
    config = load_batch(path).config
    batch_id = run_batch(sqlite_workers, path, ends=BatchState.DEGRADED)
    sessions = session_factory(sqlite_workers.database_url)

    # Only the LLM judge called the simulator: 2 samples per cell.
    assert answered(simulator, llm) == len(ITEMS) * 2 * 2
    verdicts = list(iter_verdicts(sessions, batch_id))
    assert len(verdicts) == len(ITEMS) * 2
    for verdict in verdicts:
        item = Item.model_validate(next(i for i in ITEMS if i["id"] == verdict.item_id))
        dimension = config.dimension(verdict.criterion_id)
        means = []
        for judge in config.panel:
            evaluation = verdict.llm_evaluations[judge.name]
            if judge.name == "broken":
                assert evaluation.samples == [] and evaluation.n_failed == 1
                continue
            if judge.heuristic is not None:
                expected, _ = heuristic_score(judge, item, item.output or "", dimension, [FNS])
                assert evaluation.samples == [expected]
            means.append(statistics.fmean(evaluation.samples))
        assert verdict.consensus_metrics.final_score == pytest.approx(statistics.fmean(means))
        samples = list_samples(sessions, CellRef(batch_id, verdict.item_id, verdict.criterion_id))
        for sample in samples:
            if sample.judge == llm:
                assert sample.prompt_tokens > 0
                continue
            assert (sample.cost_usd, sample.prompt_tokens, sample.cached) == (0, 0, False)
            if sample.judge == "broken":
                assert sample.error_kind == "heuristic_raised"
                assert sample.error == (
                    f"{FNS}:raises raised RuntimeError: cannot measure {verdict.item_id}"
                )
            else:
                assert sample.reasoning
    # The figures the heuristics are known to give on the scale 1..10 of tone.
    h0 = {v.criterion_id: v for v in verdicts if v.item_id == "h0"}["tone"].llm_evaluations
    assert h0["short"].samples == [10.0]  # 5 words
    assert h0["steps"].samples == [pytest.approx(1 + 9 * 2 / 3)]  # then, settings
    assert h0["echo"].samples == [10.0]  # "password"
    status = batch_status(sessions, batch_id)
    assert status.n_samples == len(ITEMS) * 2 * (2 + 3 + 1)
    assert status.n_failed_samples == len(ITEMS) * 2


def test_a_heuristic_judges_a_pair_side_by_side(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    llm = tagged("balanced", short_task_id().lower().replace("_", "").replace("-", ""))
    spec = {
        "judges": [
            {"model": llm, "n": 1},
            {"name": "short", "heuristic": {"kind": "length", "max": 8}},
        ],
        "dimensions": ["relevance"],
        "pairwise": {"orders": "single"},
        "items": PAIRS[:3],
    }
    path = write_batch(tmp_path, simulator, spec)
    batch_id = run_batch(sqlite_workers, path)
    sessions = session_factory(sqlite_workers.database_url)
    assert answered(simulator, llm) == 3
    for pair in PAIRS[:3]:
        cell = CellRef(batch_id, pair["id"], "relevance")
        detail = pair_judgments(sessions, cell)[("short", 0)]
        a_short = len(pair["output_a"].split()) <= 8
        b_short = len(pair["output_b"].split()) <= 8
        assert (detail.a_first_a, detail.a_first_b) == (5 if a_short else 1, 5 if b_short else 1)
        assert detail.b_first_a is None


def test_a_runaway_heuristic_is_stopped_while_its_worker_beats_and_works_on(
    tmp_path: Path,
    sqlite_workers: Settings,
    simulator: ManagedProcess,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A catastrophic regex answers at once (RE2); a callable stuck in C code holding the
    GIL (Python's own `re` backtracking) is killed at its timeout_s. Meanwhile each worker's
    heartbeat goes on, the LLM judge's tasks are answered, and no task is handed to a second
    worker: every call and sample happens once. A callable the producer allowed (its setting
    names `tests`) but the workers do not is refused by the workers, never imported."""
    monkeypatch.setenv("JURY_HEURISTIC_CALLABLES", "tests")
    llm = tagged("balanced", short_task_id().lower().replace("_", "").replace("-", ""))
    words = "Supercalifragilisticexpialidociousness"  # 38 word characters, then a `!`
    items = [{"id": f"r{n}", "input": "Say it?", "output": f"{words}{n}!"} for n in range(3)]
    spec = {
        "judges": [
            {"model": llm, "n": 2},
            {"name": "bomb", "heuristic": {"kind": "regex", "pattern": r"^(\w+\s?)*$"}},
            {
                "name": "stuck",
                "timeout_s": 2,
                "heuristic": {"kind": "callable", "function": f"{FNS}:backtracks"},
            },
            {
                "name": "unallowed",
                "heuristic": {
                    "kind": "callable",
                    "function": "tests.unallowed_heuristics:leaves_a_mark",
                },
            },
        ],
        "dimensions": ["relevance"],
        "items": items,
    }
    path = write_batch(tmp_path, simulator, spec)
    broker = BrokerRedis.from_settings(sqlite_workers)
    heartbeats = broker.key(heartbeats_key(sqlite_workers.queue))
    beats: dict[str, list[float]] = {}
    sessions = session_factory(sqlite_workers.database_url)
    batch_id = submit_batch(load_batch(path), sessions, create_producer_app(sqlite_workers))

    def finished() -> bool:
        found = broker.client.zrange(heartbeats, 0, -1, withscores=True)
        for worker, at in cast(list[tuple[bytes, float]], found):
            seen = beats.setdefault(worker.decode(), [])
            if not seen or seen[-1] != at:
                seen.append(at)
        return batch_status(sessions, batch_id).status.finished

    wait_for(finished, 90, "the batch", poll=0.2)
    assert batch_status(sessions, batch_id).status == BatchState.DEGRADED
    # Both workers beat all along: every 2.5 s (a twelfth of the 30 s timeout), never a
    # silence near the timeout, whatever the stuck callable held.
    assert len(beats) == 2
    # Up to the end, by Redis' clock (a batch done within a beat shows one beat per worker).
    seconds, micros = cast(tuple[int, int], broker.client.time())
    now_ms = seconds * 1000 + micros / 1000
    for seen in beats.values():
        assert max(b - a for a, b in itertools.pairwise([*seen, now_ms])) < 10_000, seen
    assert answered(simulator, llm) == len(items) * 2  # no task judged twice
    assert_exactly_once(sqlite_workers, batch_id)
    by_judge: dict[str, list[Any]] = {}
    for item in items:
        for sample in list_samples(sessions, CellRef(batch_id, item["id"], "relevance")):
            by_judge.setdefault(sample.judge, []).append(sample)
    assert [(s.score, s.reasoning) for s in by_judge["bomb"]] == [
        (1.0, "the pattern does not match")
    ] * len(items)
    for sample in by_judge["stuck"]:
        assert sample.error_kind == "heuristic_timeout"
        assert (
            sample.error == "no score within the judge's timeout_s of 2 s: the measure was stopped"
        )
        assert 2000 <= sample.latency_ms < 10_000
    for sample in by_judge["unallowed"]:
        assert sample.error_kind == "heuristic_refused"
        assert "not in a module that JURY_HEURISTIC_CALLABLES allows" in (sample.error or "")
