"""The shell examples that README.md and docs/running.md mark as running (RUNS_MARK on a
```sh block) run as written, through tests/doc_examples.py's runner: each page's marked blocks
in order, in a folder of their own holding the batch files they name, with the chosen
installation's `jury` first on PATH (tests/examples_stack.py) and the JURY_* environment of the
test Redis; `<batch-id>` and `<item-id>` filled from what earlier commands printed, `&` lines
stopped at the end, every line exiting 0 with no traceback."""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from jury.api import attach
from jury.local.services import ManagedProcess
from jury.settings import Settings
from tests import examples_stack
from tests.conftest import ROOT
from tests.doc_examples import Line, PageRun, free_ports, marked_examples, page_lines, run_page
from tests.examples_stack import example_env, stack_settings
from tests.integration.test_docs import README

pytestmark = [pytest.mark.integration, pytest.mark.examples]

RUNNING = ROOT / "docs" / "running.md"
SHELL_PAGES = {"README.md": README, "running.md": RUNNING}
# The docs' simulator port (`jury simulate --port 8011`), free here or not.
DOC_SIMULATOR_PORT = 8011


@pytest.fixture(scope="module")
def example_workers(request: pytest.FixtureRequest) -> Iterator[Settings]:
    yield from examples_stack.example_workers(request)


def test_the_pages_mark_their_shell_examples() -> None:
    counts = {name: len(marked_examples(page, "sh")) for name, page in SHELL_PAGES.items()}
    assert counts == {"README.md": 1, "running.md": 4}
    for name, page in SHELL_PAGES.items():
        for line in page_lines(name, page.read_text()):
            # A usage synopsis (`[--missing-only]`, `FILE…`) is not a command one can type.
            assert not re.search(r"\[-|…|\.\.\.", line.command), line.where()


def _page(*commands: str) -> list[Line]:
    block = "\n".join(commands)
    return page_lines("page.md", f"<!-- example: runs -->\n```sh\n{block}\n```\n")


def _run(tmp_path: Path, lines: list[Line]) -> PageRun:
    run = PageRun(tmp_path, dict(os.environ), lambda batch_id: "q1", tmp_path, free_ports(lines))
    run_page(lines, run)
    return run


def test_the_runner_names_the_line_that_failed_and_stops_what_the_page_started(
    tmp_path: Path,
) -> None:
    lines = _page(
        "sleep 60 &",
        "export GREETING='hello there'",
        'test "$GREETING" = "hello there"',
        "false                    # exits 1",
        "exit 3",
    )
    run = PageRun(tmp_path, dict(os.environ), lambda batch_id: "q1", tmp_path)
    with pytest.raises(AssertionError, match=r"page.md, block 1, line 5: `exit 3` exited 3, not 0"):
        run_page(lines, run)
    assert [line.number for line, _ in run.took] == [1, 2, 3, 4]  # up to the failure
    (sleeper,) = run.background
    assert sleeper.process.returncode == -signal.SIGTERM  # stopped: no stray process


@pytest.mark.parametrize(
    ("commands", "message"),
    [
        (
            # deaf to our SIGTERM once `started` exists: it exits 4 of its own, always
            ("sh -c 'trap \"\" TERM; touch started; exit 4' &", "until [ -e started ]; do :; done"),
            r"line 1: `sh -c .*` exited 4",
        ),
        (("echo 'Traceback (most recent call last):'",), r"line 1: `echo .*` printed"),
        (("jury show <batch-id>",), r"line 1: `jury show <batch-id>`: nothing earlier gives"),
        (("sleep 60 --port 8011 &",), r"line 1: `sleep 60 --port \d+` never listened"),
    ],
)
def test_the_runner_fails_a_page_that_does_not_run_as_written(
    tmp_path: Path, commands: tuple[str, ...], message: str
) -> None:
    with pytest.raises(AssertionError, match=message):
        _run(tmp_path, _page(*commands))


def _item_of(settings: Settings) -> Callable[[str], str]:
    def item_of(batch_id: str) -> str:
        first = next(iter(attach(batch_id, settings=settings).records()), None)
        assert first is not None, f"batch {batch_id} has no verdict to take an item from"
        return first.item_id

    return item_of


def _judges(api_base: str, *personas: str) -> list[dict[str, object]]:
    return [{"model": f"openai/{p}", "n": 1, "api_base": api_base} for p in personas]


ITEMS = [
    {"id": "q1", "input": "How do I reset my password?", "output": "Use the link we email."},
    {"id": "q2", "input": "Where is my invoice?", "output": "Under Billing > Invoices."},
]


def test_the_readme_shell_example_runs_as_written(
    example_workers: Settings, simulator: ManagedProcess, tmp_path: Path
) -> None:
    folder, logs = tmp_path / "work", tmp_path / "logs"
    folder.mkdir()
    logs.mkdir()
    batch = {
        "name": "support-answers",
        "judges": _judges(simulator.url, "balanced", "strict"),
        "dimensions": ["relevance", {"name": "tone", "description": "Is the tone kind?"}],
        "items": "items.jsonl",
    }
    (folder / "support.yaml").write_text(yaml.safe_dump(batch))
    (folder / "items.jsonl").write_text("".join(json.dumps(item) + "\n" for item in ITEMS))
    lines = page_lines("README.md", README.read_text())
    env = example_env(example_workers)
    run_page(lines, PageRun(folder, env, _item_of(example_workers), logs, free_ports(lines)))
    assert "<html" in (folder / "report.html").read_text()[:500].lower()


def test_the_running_page_runs_as_written(redis_url: str, tmp_path: Path) -> None:
    """Its own `jury worker`s and `jury simulate` judge everything, on a queue no other
    worker serves; the page's `export JURY_EGRESS_ALLOW` is what lets them reach it."""
    folder, logs = tmp_path / "work", tmp_path / "logs"
    folder.mkdir()
    logs.mkdir()
    settings = stack_settings(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    lines = page_lines("running.md", RUNNING.read_text())
    ports = free_ports(lines)
    # `jury init`'s starter names the simulator as ${JURY_SIMULATOR_URL:-…:8011/v1}.
    simulator_url = f"http://127.0.0.1:{ports[DOC_SIMULATOR_PORT]}/v1"
    env = {**example_env(settings), "JURY_SIMULATOR_URL": simulator_url}
    del env["JURY_EGRESS_ALLOW"]
    for name, personas in (("my_batch.yaml", ("balanced", "strict")), ("batch.yaml", ("lenient",))):
        batch = {
            "name": name.removesuffix(".yaml"),
            "judges": _judges("${JURY_SIMULATOR_URL}", *personas),
            "dimensions": ["relevance"],
            "items": ITEMS,
        }
        (folder / name).write_text(yaml.safe_dump(batch))
    run = PageRun(folder, env, _item_of(settings), logs, ports)
    run_page(lines, run)
    print(*(f"{seconds:6.2f} s  {line.where()}" for line, seconds in run.took), sep="\n")
    assert (folder / "my-eval" / "batch.yaml").exists()
    assert "<html" in (folder / "report.html").read_text()[:500].lower()
