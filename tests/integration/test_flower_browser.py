"""`jury flower` in a real headless browser, during a real batch: Flower lists jury's judge
tasks (name, labelled arguments with the batch id) and its worker, behind its login, and no
provider key planted in the worker's environment shows anywhere in it."""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from jury.errors import ConfigurationError
from jury.local.services import ManagedProcess, free_port, wait_for
from jury.producer.publishing import create_producer_app
from jury.schemas.tasks import AGGREGATE_TASK, JUDGE_TASK
from jury.settings import Settings
from tests.browser import chromium_driver, console_errors, full_page_screenshot, use_basic_auth
from tests.conftest import WorkerStarter, settings_for, worker_env
from tests.integration.test_cli import JURY, jury
from tests.integration.test_pipeline import write_batch

pytestmark = pytest.mark.integration
browser = pytest.fixture(scope="module")(chromium_driver)
USER, PASSWORD = "jury-test", f"pw-{secrets.token_hex(6)}"


class Flower:
    def __init__(self, process: ManagedProcess, port: int) -> None:
        self.process, self.base = process, f"http://127.0.0.1:{port}"

    def get(self, path: str, auth: bool = True) -> tuple[int, str]:
        request = urllib.request.Request(self.base + path)
        if auth:
            token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, ""

    def answers(self, path: str, needle: str) -> bool:
        if not self.process.alive():
            raise AssertionError(f"jury flower died:\n{self.process.log_tail()}")
        try:
            status, body = self.get(path)
        except OSError:
            return False
        return status == 200 and needle in body


@pytest.fixture
def flower(tmp_path: Path, logs_dir: Path, redis_url: str) -> Iterator[tuple[Flower, Settings]]:
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}").model_copy(
        update={"flower_hosts": ["flower.jury-test.invalid"]}
    )
    port = free_port()
    env = {**worker_env(settings), "FLOWER_BASIC_AUTH": f"{USER}:{PASSWORD}"}
    log_path = logs_dir / f"flower-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [*JURY, "flower", "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    managed = ManagedProcess("flower", process, log_path)
    yield Flower(managed, port), settings
    managed.stop(grace=5)


def watched_by_flower(server: Flower, settings: Settings, worker: ManagedProcess) -> None:
    """Returns once Flower lists `worker` and the worker sends task events. Flower turns
    events on by sending Celery's enable_events to every worker every 5 s, and a worker sends
    none before: a batch submitted earlier could finish unseen. Here it is done at once, as
    Flower does it, to know when it is done."""
    node = f"{worker.name}@localhost"
    wait_for(lambda: server.answers("/workers?json=1", node), 60, "Flower to see the worker")
    control = create_producer_app(settings).control
    wait_for(
        lambda: bool(control.broadcast("enable_events", destination=[node], reply=True, timeout=1)),
        30,
        "the worker's task events",
    )


def test_flower_shows_jury_tasks_and_workers(
    tmp_path: Path,
    flower: tuple[Flower, Settings],
    simulator: ManagedProcess,
    start_workers: WorkerStarter,
    browser: Any,
) -> None:
    server, settings = flower
    keys = {
        "JURY_TEST_PLANTED_KEY": f"sk-planted-{secrets.token_hex(12)}",
        "OPENAI_API_KEY": f"sk-openai-planted-{secrets.token_hex(12)}",
    }
    [worker] = start_workers(settings, **keys)
    watched_by_flower(server, settings, worker)
    node = f"{worker.name}@localhost"
    assert server.get("/workers", auth=False)[0] == 401, "Flower must ask for its login"

    judges = [
        {"model": "openai/balanced", "n": 2, "api_key_env": "JURY_TEST_PLANTED_KEY"},
        {"model": "openai/balanced@broken", "n": 1},  # 503s: error results, with their text
    ]
    batch = write_batch(tmp_path, simulator, judges)
    env = {**worker_env(settings), **keys}
    submitted = jury(["submit", str(batch), "--wait", "--quiet", "--timeout", "90"], env, tmp_path)
    assert submitted.returncode == 0, submitted.stderr
    batch_id = submitted.stdout.strip()
    assert "\n" not in batch_id, "--quiet prints the batch id alone"
    # 5 items × 2 dimensions × 3 samples, of which the broken judge's 10 failed, and 10
    # chord callbacks; Flower has them once their events arrived.
    states: Counter[str] = Counter()
    callbacks: Counter[str] = Counter()

    def all_listed() -> bool:
        states.clear()
        callbacks.clear()
        tasks = _tasks(server, batch_id, JUDGE_TASK).values()
        states.update(f"{t.get('state')} {'broken' in str(t.get('args'))}" for t in tasks)
        callbacks.update(
            str(t.get("state")) for t in _tasks(server, batch_id, AGGREGATE_TASK).values()
        )
        return (
            states["SUCCESS False"] >= 20
            and states["FAILURE True"] >= 10
            and callbacks["SUCCESS"] >= 10
        )

    try:
        wait_for(all_listed, 60, "Flower to list the tasks")
    except ConfigurationError:
        raise AssertionError(
            f"Flower lists {dict(states)} judge tasks and {dict(callbacks)} callbacks\n"
            f"{server.process.log_tail()}"
        ) from None
    # A failed judgment is a failure in Flower, with its error kind, yet it was stored once and
    # never redelivered; a successful one shows its score; a callback its verdict.
    failed = [
        t for t in _tasks(server, batch_id, JUDGE_TASK).values() if t.get("state") == "FAILURE"
    ]
    assert all("JudgmentFailed" in str(t.get("exception")) for t in failed)
    assert all("server_error" in str(t.get("exception")) for t in failed)
    scored = [
        t for t in _tasks(server, batch_id, JUDGE_TASK).values() if t.get("state") == "SUCCESS"
    ]
    assert all(
        float(t["result"]) in {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0} for t in scored
    )
    verdicts = _tasks(server, batch_id, AGGREGATE_TASK).values()
    assert all("final_score" in str(t.get("result")) for t in verdicts)
    assert "raised expected: JudgmentFailed" in worker.log_tail(2000)

    use_basic_auth(browser, USER, PASSWORD)
    browser.get(server.base + "/tasks")
    table = browser.find_element(By.ID, "tasks-table")
    WebDriverWait(browser, 20).until(lambda _: batch_id in table.text)
    rows = [r.text for r in table.find_elements(By.CSS_SELECTOR, "tbody tr")]
    ours = [r for r in rows if "jury.judge_sample" in r and f"batch={batch_id}" in r]
    assert ours, f"no labelled jury.judge_sample row for {batch_id} in {rows[:3]}"
    assert any("dimension=relevance" in r and "judge=openai/balanced" in r for r in ours)
    cells = [r for r in rows if "jury.aggregate_cell" in r and f"batch={batch_id}" in r]
    assert cells and all("dimension=" in r and "judge=" not in r for r in cells)
    full_page_screenshot(browser, tmp_path / "flower-tasks.png")
    # A failed judgment's own page: FAILURE, its error kind and message.
    browser.get(server.base + f"/task/{sorted(t['uuid'] for t in failed)[0]}")
    WebDriverWait(browser, 20).until(lambda d: "JudgmentFailed" in d.page_source)
    assert "FAILURE" in browser.page_source and "server_error" in browser.page_source
    browser.get(server.base + "/tasks")
    pages = {"tasks": browser.page_source}

    browser.get(server.base + "/workers")
    # The node name is drawn in two spans (prefix, suffix); the link's title holds it whole.
    WebDriverWait(browser, 20).until(lambda _: node in _worker_links(browser))
    pages["workers"] = browser.page_source
    browser.get(server.base + f"/worker/{node}")
    WebDriverWait(browser, 20).until(lambda d: node in d.page_source)
    pages["worker"] = browser.page_source
    assert console_errors(browser) == []

    # What else Flower shows: each task's details, its API, the broker.
    for task_id in _judge_task_ids(server, batch_id)[:10]:
        pages[f"task {task_id}"] = server.get(f"/task/{task_id}")[1]
    for path in ("/api/tasks", "/api/workers", "/broker"):
        status, pages[path] = server.get(path)
        assert status == 200, path
    for where, content in pages.items():
        for key in keys.values():
            assert key not in content, f"a provider key shows in Flower's {where}"
        assert PASSWORD not in content, f"Flower's own password shows in its {where}"


def _worker_links(browser: Any) -> list[str]:
    links = browser.find_elements(By.CSS_SELECTOR, "#workers-table a.worker-name-link")
    return [link.get_attribute("title") for link in links]


def _tasks(server: Flower, batch_id: str, name: str) -> dict[str, Any]:
    status, body = server.get(f"/api/tasks?taskname={name}&limit=1000")
    if status != 200:
        return {}
    tasks: dict[str, Any] = json.loads(body)
    return {k: t for k, t in tasks.items() if batch_id in str(t.get("args"))}


def _judge_task_ids(server: Flower, batch_id: str) -> list[str]:
    return sorted(_tasks(server, batch_id, JUDGE_TASK))


def test_flower_refuses_a_malformed_login(tmp_path: Path, redis_url: str) -> None:
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    result = subprocess.run(
        [*JURY, "flower", "--port", str(free_port()), "--basic-auth", "no-colon-here"],
        env=worker_env(settings),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "must be user:password" in result.stderr and "no-colon-here" not in result.stderr
    assert "Traceback" not in result.stderr


def test_flower_answers_only_the_hosts_it_was_told(
    flower: tuple[Flower, Settings],
) -> None:
    """DNS rebinding: a page on another site whose name resolves to this machine sends its
    own name as Host; Flower answers it 421 and nothing else, pages and API alike."""
    server, _ = flower
    wait_for(lambda: server.answers("/workers?json=1", "{"), 60, "Flower")
    port = server.base.rsplit(":", 1)[1]
    for host, refused in [
        (f"127.0.0.1:{port}", False),
        (f"localhost:{port}", False),
        (f"flower.jury-test.invalid:{port}", False),  # JURY_FLOWER_HOSTS
        (f"evil.example:{port}", True),
        ("evil.example", True),
        (f"127.0.0.1.evil.example:{port}", True),
    ]:
        for path in ("/workers?json=1", "/tasks/datatable?draw=1", "/api/workers", "/"):
            request = urllib.request.Request(server.base + path, headers={"Host": host})
            token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
            try:
                with urllib.request.urlopen(request, timeout=5) as response:
                    got, body = response.status, response.read().decode()
            except urllib.error.HTTPError as exc:
                got, body = exc.code, exc.read().decode()
            assert (got == 421) == refused, (host, path, got)
            if refused:
                assert body.startswith("jury flower answers only the hosts it was told")
