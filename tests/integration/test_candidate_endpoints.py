"""HTTP endpoint candidates end to end with real parts (Redis, the shared workers, the
simulator as the judge and the other candidate) and a tiny HTTP endpoint of the test's own as
the evaluator's chatbot API: an endpoint that answers 500 has its error judged as its answer,
and an endpoint's own limits hold across the workers."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from jury.local.services import ManagedProcess
from jury.settings import Settings
from jury.store.engine import session_factory
from jury.store.generations import generations
from jury.store.repository import load_config, load_item
from tests.conftest import worker_env
from tests.integration.test_candidates import QUESTIONS, results, tag, write
from tests.integration.test_cli import jury
from tests.integration.test_faults import assert_exactly_once
from tests.integration.test_modes import answered, tagged
from tests.integration.test_pipeline import run_batch

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

            def do_GET(self) -> None:  # a GET candidate: no body, the same reply each time
                endpoint.requests.append((dict(self.headers), None))
                answer = json.dumps({"data": {"reply": "The HR bot says: see the handbook"}})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer.encode())

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


def test_a_get_candidate_that_passes_dry_run_runs(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess, endpoint: Endpoint
) -> None:
    """`method: GET` (no body, as documented) passes `--dry-run`, and submit then runs it:
    the candidate is checked by one function when the batch is loaded, when the workers read
    it back from the store, and before the request is sent."""
    mark = tag()
    spec = {
        "judges": [{"model": tagged("balanced", f"j{mark}"), "api_base": simulator.url}],
        "dimensions": ["relevance"],
        "candidates": [
            {"name": "faq-bot", "url": endpoint.url, "method": "GET", "answer_path": "data.reply"}
        ],
        "items": [{"id": f"q{i}", "input": f"question {i}"} for i in range(2)],
    }
    batch = write(tmp_path, spec)
    env = worker_env(sqlite_workers)
    planned = jury(["submit", str(batch), "--dry-run"], env, tmp_path)
    assert planned.returncode == 0, planned.stderr
    ran = jury(["submit", str(batch), "--wait", "--quiet"], env, tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    batch_id = ran.stdout.strip().splitlines()[-1]
    assert [body for _, body in endpoint.requests] == [None, None]  # two GETs, no body
    stored = generations(session_factory(sqlite_workers.database_url), batch_id)
    assert sorted(g.text for _, g in stored) == ["The HR bot says: see the handbook"] * 2
