"""The Python examples that README.md and docs/python-api.md mark as running (RUNS_MARK,
tests/doc_examples.py) run as written: each in a fresh interpreter of the chosen installation
(tests/examples_stack.py), from a folder holding the batch files they name (judged by the
simulator), with the JURY_* environment naming the test Redis and workers, as docs/running.md
tells users to set it. Each leaves no temporary file behind, and what it calls `results` is the
whole batch, finished. The installation is the one the examples use."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from jury.local.services import ManagedProcess
from jury.settings import Settings
from tests import examples_stack
from tests.conftest import ROOT
from tests.doc_examples import marked_examples
from tests.examples_stack import EXAMPLES_BIN, INSTALLED_ELSEWHERE, example_env
from tests.integration.test_docs import README

pytestmark = [pytest.mark.integration, pytest.mark.examples]


@pytest.fixture(scope="module")
def example_workers(request: pytest.FixtureRequest) -> Iterator[Settings]:
    yield from examples_stack.example_workers(request)


def test_the_examples_use_the_chosen_installation(tmp_path: Path) -> None:
    env = example_env()
    assert shutil.which("jury", path=env["PATH"]) == str(EXAMPLES_BIN / "jury")
    found = subprocess.run(
        [str(EXAMPLES_BIN / "python"), "-c", "import jury; print(jury.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    module = Path(found.stdout.strip()).resolve()
    if INSTALLED_ELSEWHERE:
        assert not module.is_relative_to(ROOT), f"the examples import jury from {module}"
        assert module.is_relative_to(EXAMPLES_BIN.parent.resolve()), module
    else:
        assert module == ROOT / "jury" / "__init__.py"


PYTHON_PAGES = [README, ROOT / "docs" / "python-api.md"]
EXAMPLES = [
    pytest.param(code, id=f"{page.name}#{n}")
    for page in PYTHON_PAGES
    for n, code in enumerate(marked_examples(page, "python"), start=1)
]
# Runs an example read from stdin, then says what its `results` hold (if it made any).
RUNNER = """
import json, sys
names = {"__name__": "__main__"}
exec(compile(sys.stdin.read(), "example", "exec"), names)
results = names.get("results")
if results is not None:
    summary = {"status": results.status.status.value, "n_cells": results.status.n_cells,
               "n_records": len(results.records)}
    print("RESULTS " + json.dumps(summary))
"""


def test_the_pages_mark_their_examples() -> None:
    counts = {page.name: len(marked_examples(page, "python")) for page in PYTHON_PAGES}
    assert counts == {"README.md": 1, "python-api.md": 3}


@pytest.fixture(scope="module")
def batch_files(tmp_path_factory: pytest.TempPathFactory, simulator: ManagedProcess) -> Path:
    """The batch files the examples name, with the README's batch's shape and simulator
    personas for judges."""
    folder = tmp_path_factory.mktemp("examples")
    batch = {
        "name": "support-answers",
        "judges": [
            {"model": "openai/balanced", "n": 2, "api_base": simulator.url},
            {"model": "openai/strict", "n": 1, "api_base": simulator.url},
        ],
        "dimensions": [
            "relevance",
            {"name": "tone", "description": "Is the tone professional and kind?"},
        ],
        "items": [
            {"id": "q1", "input": "How do I reset my password?", "output": "Use the link."},
            {"id": "q2", "input": "Where is my invoice?", "output": "Under Billing."},
        ],
    }
    for name in ("support.yaml", "my_batch.yaml"):
        (folder / name).write_text(yaml.safe_dump(batch))
    return folder


@pytest.mark.parametrize("code", EXAMPLES)
def test_the_example_runs_as_written(
    code: str, batch_files: Path, example_workers: Settings, tmp_path: Path
) -> None:
    temporary = tmp_path / "tmp"  # where the example's temporary files would stay
    temporary.mkdir()
    env = {**example_env(example_workers), "TMPDIR": str(temporary)}
    before = sorted(p.name for p in batch_files.iterdir())
    ran = subprocess.run(
        [str(EXAMPLES_BIN / "python"), "-c", RUNNER],
        input=code,
        cwd=batch_files,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-3000:]
    assert "Traceback" not in ran.stderr
    said = [line for line in ran.stdout.splitlines() if line.startswith("RESULTS ")]
    if said:
        results = json.loads(said[0].removeprefix("RESULTS "))
        assert results["status"] == "completed"
        assert results["n_records"] == results["n_cells"] > 0
    assert sorted(p.name for p in batch_files.iterdir()) == before  # nothing left here…
    assert list(temporary.iterdir()) == []  # …nor in the temporary folder
