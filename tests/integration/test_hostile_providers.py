"""A hostile provider against real workers (issue 18): answers that trickle, garbage bytes,
invalid UTF-8, answers of megabytes, usage that lies, reasoning full of markup and escape
sequences. Each ends as a stored error sample of the right kind or a score with its text kept
as data; no cost is negative; what the user then reads shows the text as text."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from rich.console import Console

from jury.batchfile.loading import load_batch
from jury.cli.main import jury
from jury.local.services import ManagedProcess, start_simulator
from jury.producer.following import follow_batch
from jury.producer.publishing import create_producer_app
from jury.producer.submission import submit_batch
from jury.schemas.results import SampleResult
from jury.schemas.tasks import CellRef
from jury.settings import Settings
from jury.simulator.hostile import HOSTILE_KINDS, HOSTILE_REASONING, hostile_options
from jury.store.engine import session_factory
from jury.store.repository import batch_status
from jury.store.samples import list_samples
from tests.conftest import WorkerStarter, settings_for, worker_env

pytestmark = pytest.mark.integration

TRICKLE_MS = 200  # a ~350-byte answer takes over a minute to arrive
ITEMS = [
    {"id": "[bold]q1[/]", "output": "Use the 'Forgot password' link."},
    {"id": "q2 [/x] \\x1b", "output": "We ship within 2 days."},
]
PRICE = 1e-6  # every judge has a price, so a lying usage would show as a wrong cost


@pytest.fixture(scope="module")
def hostile_simulator(logs_dir: Path) -> Iterator[ManagedProcess]:
    options = ["--seed", "3", "--trickle-ms", str(TRICKLE_MS), *hostile_options()]
    process = start_simulator(logs_dir, options)
    yield process
    process.stop(grace=2)


def write_batch(folder: Path, url: str, tags: list[str], **judge: Any) -> Path:
    spec = {
        "name": "[red]hostile[/] providers",
        "judges": [
            {
                "model": f"openai/balanced@{tag}",
                "n": 1,
                "api_base": url,
                "input_cost_per_token": PRICE,
                "output_cost_per_token": PRICE,
                **judge,
            }
            for tag in tags
        ],
        "dimensions": ["relevance"],
        "items": ITEMS,
        "cache": False,
    }
    path = folder / "batch.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def samples(settings: Settings, batch_id: str) -> dict[str, list[SampleResult]]:
    sessions = session_factory(settings.database_url)
    found: dict[str, list[SampleResult]] = {}
    for item in ITEMS:
        for sample in list_samples(sessions, CellRef(batch_id, item["id"], "relevance")):
            found.setdefault(sample.judge.rsplit("@", 1)[-1], []).append(sample)
    return found


def test_hostile_answers_end_as_errors_or_text_and_cost_never_lies(
    tmp_path: Path, redis_url: str, hostile_simulator: ManagedProcess, start_workers: WorkerStarter
) -> None:
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    start_workers(settings, JURY_MAX_ATTEMPTS="2")
    tags = ["ok", *(k for k in HOSTILE_KINDS if k != "trickle")]
    batch = write_batch(tmp_path, hostile_simulator.url, tags)
    sessions = session_factory(settings.database_url)
    batch_id = submit_batch(load_batch(batch), sessions, create_producer_app(settings))
    status = follow_batch(sessions, batch_id, Console(quiet=True), timeout=90)
    assert status is not None, "the batch did not finish"
    by_judge = samples(settings, batch_id)
    assert set(by_judge) == set(tags)

    def kinds(tag: str) -> set[str | None]:
        return {s.error_kind for s in by_judge[tag]}

    assert kinds("ok") == {None}
    for tag in ("garbage-bytes", "invalid-utf8", "fractional-usage"):  # unreadable: an error
        assert all(s.score is None for s in by_judge[tag]) and None not in kinds(tag)
    assert kinds("huge-answer") == {"unparseable"}
    assert kinds("gzip-bomb") == {"server_error"}  # read no further than 8 MiB, decoded
    assert all("larger than 8 MiB" in (s.error or "") for s in by_judge["gzip-bomb"])
    assert "more than any judge answer" in (by_judge["huge-answer"][0].error or "")
    assert kinds("negative-usage") == kinds("absurd-usage") == {"bad_usage"}
    for sample in by_judge["missing-usage"]:  # no usage: counted, conservatively, not as free
        assert sample.score is not None and sample.prompt_tokens > 0 and sample.cost_usd > 0
    for sample in by_judge[
        "markup-reasoning"
    ]:  # the reasoning is data: stored exactly as the judge wrote it
        assert sample.score is not None and sample.reasoning == HOSTILE_REASONING

    every = [s for group in by_judge.values() for s in group]
    assert all(s.cost_usd >= 0 and s.prompt_tokens >= 0 for s in every)
    stored = batch_status(sessions, batch_id)
    assert stored.cost_usd >= 0
    assert stored.cost_usd == pytest.approx(sum(s.cost_usd for s in every))

    env = {**worker_env(settings)}
    table = CliRunner().invoke(jury, ["results", batch_id], env=env)
    assert table.exit_code == 0, table.output
    assert "[bold]q1[/]" in table.output and "[red]hostile[/]" in table.output  # not markup
    assert "\x1b" not in table.output
    report = tmp_path / "report.html"
    made = CliRunner().invoke(jury, ["report", batch_id, "-o", str(report)], env=env)
    assert made.exit_code == 0, made.output
    html = report.read_text()
    assert "[bold]q1[/]" in html and "<script>alert" not in html and "\x1b" not in html
    records = json.loads(
        CliRunner().invoke(jury, ["results", batch_id, "--format", "json"], env=env).output
    )
    assert {r["item_id"] for r in records["results"]} == {i["id"] for i in ITEMS}


def test_a_trickling_answer_ends_as_a_timeout_within_its_deadline(
    tmp_path: Path, redis_url: str, hostile_simulator: ManagedProcess, start_workers: WorkerStarter
) -> None:
    """The server sends its answer a byte every 200 ms (over a minute in all): every read
    gets a byte, yet the call must end at `timeout_s`, as a timeout, and the batch finish."""
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    start_workers(settings, JURY_MAX_ATTEMPTS="1")
    batch = write_batch(tmp_path, hostile_simulator.url, ["trickle"], timeout_s=1)
    sessions = session_factory(settings.database_url)
    started = time.monotonic()
    batch_id = submit_batch(load_batch(batch), sessions, create_producer_app(settings))
    bound_s = 10.0  # one 1-second call, with room for a busy machine
    status = follow_batch(sessions, batch_id, Console(quiet=True), timeout=bound_s)
    assert status is not None, f"still running after {time.monotonic() - started:.0f} s"
    trickled = samples(settings, batch_id)["trickle"]
    assert {s.error_kind for s in trickled} == {"timeout"}
