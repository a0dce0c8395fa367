"""Outputs produced by the batch (`candidates:`), end to end with real parts: Redis, the shared
workers, the simulator over HTTP as the LLM candidate, and a tiny HTTP endpoint of the test's
own as the evaluator's chatbot API. Each item's candidates answer once, the answers are
stored, then judged; an endpoint that answers 500 has its error judged as its answer; a
redelivered generation task neither generates again nor queues the judging twice."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy import func, select

from jury.producer.cli import jury
from jury.producer.loading import BatchSource, load_batch
from jury.producer.publishing import Publisher, create_producer_app, short_task_id
from jury.producer.services import ManagedProcess, wait_for
from jury.schemas.settings import Settings
from jury.schemas.tasks import GenerationRef
from jury.store.engine import session_factory
from jury.store.generations import generations
from jury.store.models import GeneratedItemRow, GenerationRow, SampleRow
from jury.store.repository import (
    add_items,
    batch_status,
    create_batch,
    load_config,
    load_item,
    start_batch,
)
from jury.store.sql import Sessions
from tests.test_faults import assert_exactly_once
from tests.test_modes import answered, tagged
from tests.test_pipeline import run_batch

pytestmark = pytest.mark.integration


class Endpoint:
    """A chatbot API: answers `{"data": {"reply": …}}`, or 500 when the input says `boom`."""

    def __init__(self, answer_after: threading.Event | None = None) -> None:
        self.requests: list[tuple[dict[str, str], Any]] = []
        # Requests being answered at once, and the most seen; with `answer_after`, each is
        # held until that event is set (or a second has passed).
        self.in_flight = self.most_in_flight = 0
        lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                with lock:
                    endpoint.in_flight += 1
                    endpoint.most_in_flight = max(endpoint.most_in_flight, endpoint.in_flight)
                try:
                    if answer_after is not None:
                        answer_after.wait(1.0)
                    self._answer()
                finally:
                    with lock:
                        endpoint.in_flight -= 1

            def _answer(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(size))
                endpoint.requests.append((dict(self.headers), body))
                question = body["messages"][0]["text"]
                if "boom" in question:
                    status, answer = 500, b'{"error": "the bot fell over"}'
                else:
                    reply = {"data": {"reply": f"The HR bot says: see the handbook on {question}"}}
                    status, answer = 200, json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/chat"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    server = Endpoint()
    yield server
    server.close()


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


def test_an_http_endpoint_s_own_limit_holds_across_the_workers(
    tmp_path: Path, running_workers: Settings, simulator: ManagedProcess
) -> None:
    """A service under test is often a staging box: its `max_in_flight` holds for every
    worker together, as a judge's does. The endpoint keeps each request for up to a second,
    so the generations of a batch, delivered at once, would otherwise overlap there."""
    server = Endpoint(answer_after=threading.Event())  # never set: each request takes 1 s
    try:
        mark = tag()
        spec = {
            "judges": [{"model": tagged("balanced", f"j{mark}"), "api_base": simulator.url}],
            "dimensions": ["relevance"],
            "candidates": [
                {
                    "name": "staging-bot",
                    "url": server.url,
                    "body": {"messages": [{"text": "{{input}}"}]},
                    "answer_path": "data.reply",
                    "max_in_flight": 1,
                    "timeout_s": 10,
                }
            ],
            "items": [{"id": f"q{i}", "input": f"question {i}"} for i in range(4)],
        }
        batch_id = run_batch(running_workers, write(tmp_path, spec))
        assert len(server.requests) == 4 and server.most_in_flight == 1
        stored = generations(session_factory(running_workers.database_url), batch_id)
        assert all(g.error_kind is None for _, g in stored) and len(stored) == 4
    finally:
        server.close()


def test_two_candidates_an_llm_and_an_http_endpoint_are_a_named_pair(
    tmp_path: Path,
    running_workers: Settings,
    simulator: ManagedProcess,
    endpoint: Endpoint,
) -> None:
    mark = tag()
    writer, judge = tagged("balanced", f"w{mark}"), tagged("balanced", f"j{mark}")
    spec = {
        "judges": [{"model": judge, "n": 1, "temperature": 0, "api_base": simulator.url}],
        "dimensions": ["relevance"],
        "candidates": [
            {"name": "python-bot", "model": writer, "api_base": simulator.url},
            {
                "name": "dotnet-bot",
                "url": endpoint.url,
                "headers": {"Authorization": "Bearer ${JURY_TEST_UNSET_TOKEN:-dev-token}"},
                "body": {"messages": [{"text": "{{input}}"}], "lang": "en"},
                "answer_path": "data.reply",
                "timeout_s": 5,
            },
        ],
        "items": [{"id": k, "input": v} for k, v in QUESTIONS.items()],
    }
    batch_id = run_batch(running_workers, write(tmp_path, spec))
    sessions = session_factory(running_workers.database_url)

    # The endpoint got each input once, as one JSON string value, and the expanded header.
    assert sorted(body["messages"][0]["text"] for _, body in endpoint.requests) == sorted(
        QUESTIONS.values()
    )
    assert all(h["Authorization"] == "Bearer dev-token" for h, _ in endpoint.requests)
    assert all(body["lang"] == "en" for _, body in endpoint.requests)
    answers = {(item, g.candidate): g for item, g in generations(sessions, batch_id)}
    assert len(answers) == len(QUESTIONS) * 2
    failed = answers[("q3", "dotnet-bot")]
    assert failed.error_kind == "http_500"
    assert failed.text.startswith("[ERROR http_500] HTTP 500:") and "fell over" in failed.text
    assert answers[("q1", "dotnet-bot")].text.startswith("The HR bot says")

    # Each item a pair: A the first candidate's answer, B the second's, named after them;
    # the error judged as B's answer like any other.
    records = {r["item_id"]: r for r in results(running_workers, batch_id)}
    assert set(records) == set(QUESTIONS)
    for item_id, record in records.items():
        outcome = record["pairwise"]
        assert (outcome["name_a"], outcome["name_b"]) == ("python-bot", "dotnet-bot")
        item = load_item(sessions, batch_id, item_id)
        assert item.output_a == answers[(item_id, "python-bot")].text
        assert item.output_b == answers[(item_id, "dotnet-bot")].text
    assert answered(simulator, judge) == len(QUESTIONS) * 2  # both orders, once each
    assert_exactly_once(running_workers, batch_id)
    # The stored config keeps the placeholder, never its value.
    stored = json.dumps(load_config(sessions, batch_id).model_dump(mode="json"))
    assert "${JURY_TEST_UNSET_TOKEN:-dev-token}" in stored


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
