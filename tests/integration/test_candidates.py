"""Outputs produced by the batch (`candidates:`), end to end with real parts: Redis, the shared
workers, the simulator over HTTP as the LLM candidate. Each item's candidates answer once,
the answers are stored, then judged; a redelivered generation task neither generates again
nor queues the judging twice. HTTP endpoint candidates:
tests/integration/test_candidate_endpoints.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy import func, select

from jury.batchfile.loading import BatchSource, load_batch
from jury.cli.main import jury
from jury.local.services import ManagedProcess, wait_for
from jury.producer.publishing import Publisher, create_producer_app, short_task_id
from jury.schemas.tasks import GenerationRef
from jury.settings import Settings
from jury.store.engine import session_factory
from jury.store.generations import generations
from jury.store.models import GeneratedItemRow, GenerationRow, SampleRow
from jury.store.repository import (
    add_items,
    batch_status,
    create_batch,
    load_item,
    start_batch,
)
from jury.store.sql import Sessions
from tests.integration.test_faults import assert_exactly_once
from tests.integration.test_modes import answered, tagged
from tests.integration.test_pipeline import run_batch

pytestmark = pytest.mark.integration


def tag() -> str:
    return short_task_id().lower().replace("_", "").replace("-", "")


def write(folder: Path, spec: dict[str, Any]) -> Path:
    path = folder / "batch.yaml"
    path.write_text(yaml.safe_dump({"name": "candidates-test", **spec}))
    return path


def results(settings: Settings, batch_id: str) -> list[dict[str, Any]]:
    shown = CliRunner().invoke(
        jury, ["results", batch_id, "--format", "json"], env=settings.to_env()
    )
    assert shown.exit_code == 0, shown.output
    records: list[dict[str, Any]] = json.loads(shown.output)["results"]
    return records


QUESTIONS = {
    "q1": "How many vacation days do I get?",
    "q2": 'What is "sick leave"? {"braces": true}',
    "q3": "boom: may I work remotely?",
}


def test_one_llm_candidate_writes_each_output_then_it_is_judged(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    mark = tag()
    writer, judge = tagged("balanced", f"w{mark}"), tagged("balanced", f"j{mark}")
    spec = {
        "judges": [{"model": judge, "n": 2, "api_base": simulator.url}],
        "dimensions": ["relevance", "helpfulness"],
        "candidates": [
            {"name": "bot", "model": writer, "api_base": simulator.url, "system": "Be brief."}
        ],
        "items": [{"id": k, "input": v} for k, v in QUESTIONS.items()],
    }
    batch_id = run_batch(sqlite_workers, write(tmp_path, spec))
    sessions = session_factory(sqlite_workers.database_url)
    stored = generations(sessions, batch_id)
    # One call per item to the candidate, its answer stored and written into the item.
    assert answered(simulator, writer) == len(QUESTIONS)
    assert sorted(item for item, _ in stored) == sorted(QUESTIONS)
    for item_id, generation in stored:
        assert generation.candidate == "bot" and generation.error_kind is None
        assert QUESTIONS[item_id] in generation.text  # the simulator answers the input
        assert generation.completion_tokens > 0
        assert load_item(sessions, batch_id, item_id).output == generation.text
    # Then judged like any output: 3 items x 2 dimensions x 2 samples.
    assert answered(simulator, judge) == len(QUESTIONS) * 2 * 2
    assert len(results(sqlite_workers, batch_id)) == len(QUESTIONS) * 2
    assert_exactly_once(sqlite_workers, batch_id)


def recorded_batch(
    tmp_path: Path, settings: Settings, simulator: ManagedProcess, prefix: str, judge_samples: int
) -> tuple[BatchSource, Sessions, str, str, str]:
    """A batch of two inputs and one LLM candidate, recorded in the store with its items and
    nothing queued (the test plays the deliveries): (source, sessions, batch id, the
    candidate's model, the judge's model)."""
    mark = tag()
    writer, judge = tagged("balanced", f"w{mark}"), tagged("balanced", f"j{mark}")
    spec = {
        "judges": [{"model": judge, "n": judge_samples, "api_base": simulator.url}],
        "dimensions": ["relevance"],
        "candidates": [{"name": "bot", "model": writer, "api_base": simulator.url}],
        "items": [{"id": "a", "input": "Who approves leave?"}, {"id": "b", "input": "Pay day?"}],
    }
    source = load_batch(write(tmp_path, spec))
    batch_id = f"{prefix}-{mark}"
    sessions = session_factory(settings.database_url)
    create_batch(sessions, batch_id, source.config, "test", 2, 2)
    add_items(sessions, batch_id, enumerate(source.items()))
    return source, sessions, batch_id, writer, judge


def test_a_redelivered_generation_neither_generates_nor_queues_twice(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    """The first delivery stored the answer and died before the judging was queued: the
    next one queues it without asking again; later ones do nothing."""
    source, sessions, batch_id, writer, judge = recorded_batch(
        tmp_path, sqlite_workers, simulator, "redeliver", judge_samples=2
    )
    with sessions.begin() as session:  # what the first delivery of (a, bot) stored
        session.add(GenerationRow(batch_id=batch_id, item_id="a", candidate="bot", text="HR."))
    publisher = Publisher(create_producer_app(sqlite_workers), source.config)
    try:
        publisher.publish_generations([GenerationRef(batch_id, "a", "bot")])

        def judged(item_id: str) -> int:
            with sessions() as session:
                return int(
                    session.scalar(
                        select(func.count())
                        .select_from(SampleRow)
                        .where(SampleRow.batch_id == batch_id, SampleRow.item_id == item_id)
                    )
                    or 0
                )

        wait_for(lambda: judged("a") == 2, 30, "item a judged")
        assert answered(simulator, writer) == 0  # never asked: the answer was stored
        assert load_item(sessions, batch_id, "a").output == "HR."
        # Delivered twice more, then b once: b is generated and judged, a changes nothing.
        publisher.publish_generations([GenerationRef(batch_id, "a", "bot")] * 2)
        wait_for(lambda: publisher.queued() == 0, 30, "the duplicates taken")
        publisher.publish_generations([GenerationRef(batch_id, "b", "bot")])
        wait_for(lambda: judged("b") == 2, 30, "item b judged")
        wait_for(lambda: publisher.queued() == 0, 30, "nothing left queued")
    finally:
        publisher.close()
    assert answered(simulator, writer) == 1  # b only
    assert answered(simulator, judge) == 4  # 2 samples of a, 2 of b: none twice
    assert judged("a") == 2
    with sessions() as session:
        claims = session.scalar(
            select(func.count())
            .select_from(GeneratedItemRow)
            .where(GeneratedItemRow.batch_id == batch_id)
        )
    assert claims == 2


def test_resume_queues_the_generation_an_item_lacks(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    """A running batch whose generation tasks were lost: `jury resume` queues them (not judge
    tasks for items without outputs), and the batch completes."""
    _, sessions, batch_id, writer, judge = recorded_batch(
        tmp_path, sqlite_workers, simulator, "resume", judge_samples=1
    )
    start_batch(sessions, batch_id, n_items=2, n_cells=2)  # nothing was queued: all lost
    early = CliRunner().invoke(jury, ["show", batch_id, "a"], env=sqlite_workers.to_env())
    assert early.exit_code != 0 and "has no output yet" in early.output
    shown = CliRunner().invoke(jury, ["resume", batch_id], env=sqlite_workers.to_env())
    assert shown.exit_code == 0, shown.output
    assert "re-enqueued 0 samples in 0 cells" in shown.output
    assert "re-enqueued the generation of 2 items' outputs" in shown.output
    wait_for(lambda: batch_status(sessions, batch_id).status.finished, 30, "the batch")
    assert answered(simulator, writer) == 2
    assert answered(simulator, judge) == 2
    assert_exactly_once(sqlite_workers, batch_id)
    shown = CliRunner().invoke(jury, ["show", batch_id, "a"], env=sqlite_workers.to_env())
    assert (
        shown.exit_code == 0 and "output:" in shown.output and "Who approves leave?" in shown.output
    )


def test_three_candidates_are_ranked_from_every_pair(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    """ragdiff's list of runs, written by the batch: each input answered once by each of
    three candidates, then every pair of answers judged (the N-outputs expansion), and the
    candidates ranked per item and over the batch."""
    mark = tag()
    names = ["alpha", "beta", "gamma"]
    personas = ("balanced", "strict", "lenient")
    writers = {n: tagged(p, f"{n}{mark}") for n, p in zip(names, personas, strict=True)}
    judge = tagged("balanced", f"j{mark}")
    spec = {
        "judges": [{"model": judge, "n": 1, "temperature": 0, "api_base": simulator.url}],
        "dimensions": ["relevance"],
        "pairwise": {"orders": "single"},
        "candidates": [
            {"name": n, "model": m, "api_base": simulator.url} for n, m in writers.items()
        ],
        "items": [{"id": "q1", "input": "Vacation days?"}, {"id": "q2", "input": "Remote work?"}],
    }
    batch_id = run_batch(sqlite_workers, write(tmp_path, spec))
    sessions = session_factory(sqlite_workers.database_url)
    for model in writers.values():
        assert answered(simulator, model) == 2  # each input once, whatever the pairs
    stored = {(item, g.candidate): g.text for item, g in generations(sessions, batch_id)}
    assert set(stored) == {(q, n) for q in ("q1", "q2") for n in names}
    shown = CliRunner().invoke(
        jury, ["results", batch_id, "--format", "json"], env=sqlite_workers.to_env()
    )
    document = json.loads(shown.output)
    records = {r["item_id"]: r for r in document["results"]}
    pairs = [("alpha", "beta"), ("alpha", "gamma"), ("beta", "gamma")]
    assert set(records) == {f"{q} [{a} vs {b}]" for q in ("q1", "q2") for a, b in pairs}
    for q in ("q1", "q2"):
        for a, b in pairs:
            item = load_item(sessions, batch_id, f"{q} [{a} vs {b}]")
            assert (item.output_a, item.output_b) == (stored[(q, a)], stored[(q, b)])
            outcome = records[f"{q} [{a} vs {b}]"]["pairwise"]
            assert (outcome["name_a"], outcome["name_b"]) == (a, b)
    assert answered(simulator, judge) == 6  # 2 inputs x 3 pairs, one order
    ranked = document["summary"]["outputs"]
    assert {row["output"] for row in ranked["overall"]} == set(names)
    assert set(ranked["items"]) == {"q1", "q2"}
    assert_exactly_once(sqlite_workers, batch_id)


def test_an_llm_candidate_that_fails_has_its_error_judged(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    """A model the provider does not have (the simulator answers 404): a permanent error,
    not retried, stored as the answer and judged."""
    mark = tag()
    judge = tagged("balanced", f"j{mark}")
    spec = {
        "judges": [{"model": judge, "n": 1, "api_base": simulator.url}],
        "dimensions": ["relevance"],
        "candidates": [
            {"name": "gone", "model": f"openai/nobody@{mark}", "api_base": simulator.url}
        ],
        "items": [{"id": "q1", "input": "Pay day?"}],
    }
    batch_id = run_batch(sqlite_workers, write(tmp_path, spec))
    sessions = session_factory(sqlite_workers.database_url)
    [(item_id, generation)] = generations(sessions, batch_id)
    assert generation.error_kind is not None
    assert generation.text.startswith(f"[ERROR {generation.error_kind}]")
    assert "nobody" in generation.text  # the provider's message, as the evaluator keeps it
    assert load_item(sessions, batch_id, item_id).output == generation.text
    assert answered(simulator, judge) == 1  # the error judged like an answer
    assert_exactly_once(sqlite_workers, batch_id)
