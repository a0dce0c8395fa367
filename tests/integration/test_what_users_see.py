"""What a user sees, with real processes: how a batch ended and why, a missing or misplaced
worker said within seconds, progress as samples are stored, `jury list`/`show`/`init`,
`results --samples`, `submit --limit`, Ctrl-C, and one paragraph for each mistake."""

from __future__ import annotations

import csv
import io
import json
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from jury.cli.main import jury as cli
from jury.local.services import ManagedProcess, start_simulator
from jury.settings import Settings
from tests.conftest import WorkerStarter, settings_for, worker_env
from tests.integration.test_cli import JURY, jury
from tests.integration.test_pipeline import write_batch

pytestmark = pytest.mark.integration
BROKEN = "openai/balanced@broken"  # the test simulator answers 503 to it, always


def _one_line(text: str) -> str:
    return " ".join(text.split())


def test_an_all_failed_batch_exits_non_zero_and_names_its_cause(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    env = worker_env(sqlite_workers)
    batch = write_batch(tmp_path, simulator, [{"model": BROKEN, "n": 1}])
    done = jury(["submit", str(batch), "--wait", "--timeout", "120"], env, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    batch_id = lines[-1]
    assert lines[0].startswith(f"batch {batch_id}: 5 items × 2 dimensions")  # the id first
    said = _one_line(done.stdout + done.stderr)
    assert f"batch {batch_id} failed: no verdict has a score" in said
    assert f"judge {BROKEN} failed 10 of 10 judgments (100%): server_error 10" in said
    assert "What to check: the provider answered 5xx" in said and "Traceback" not in said

    status = jury(["status", batch_id], env, tmp_path)
    assert status.returncode == 0 and "server_error 10" in _one_line(status.stdout)
    state = json.loads(jury(["status", batch_id, "--json"], env, tmp_path).stdout)
    assert state["status"] == "failed" and state["failed"] == state["total"] == 10


def test_a_degraded_batch_passes_unless_ci_asks(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    env = worker_env(sqlite_workers)
    judges = [{"model": "openai/balanced", "n": 1}, {"model": BROKEN, "n": 1}]
    batch = write_batch(tmp_path, simulator, judges)
    done = jury(["submit", str(batch), "--wait", "--timeout", "120"], env, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    batch_id = done.stdout.strip().splitlines()[-1]
    said = _one_line(done.stdout)
    assert "verdicts" in said and f"batch {batch_id} degraded" in said
    assert f"judge {BROKEN} failed 10 of 20" not in said  # per judge: its own judgments
    assert f"judge {BROKEN} failed 10 of 10 judgments" in said
    watched = jury(["status", batch_id, "--watch", "--fail-on-degraded", "-q"], env, tmp_path)
    assert watched.returncode == 4, watched.stdout + watched.stderr


def test_no_worker_is_said_within_seconds(tmp_path: Path, redis_url: str) -> None:
    # A queue no worker consumes: without a diagnosis this would wait in silence.
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    batch = tmp_path / "batch.yaml"
    batch.write_text(
        "judges: [openai/gpt-4o-mini]\ndimensions: [relevance]\nitems: [{id: a, output: b}]\n"
    )
    env = worker_env(settings)
    # Said once no worker has been seen for NO_WORKER_AFTER_S (6 s) after the first probe's
    # answer (~2 s): 10 s is ample.
    done = jury(["submit", str(batch), "--wait", "--timeout", "10"], env, tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    said = _one_line(done.stderr)
    assert f"no live worker serves this batch's queues ({settings.queue}.lane0)" in said
    assert "JURY_BROKER_URL=redis://127.0.0.1" in said and "JURY_DATABASE_URL=sqlite" in said
    batch_id = done.stdout.strip().splitlines()[-1]
    watched = jury(["status", batch_id, "--watch", "--json", "--timeout", "10"], env, tmp_path)
    assert watched.returncode == 3
    warnings = [json.loads(line)["warning"] for line in watched.stdout.splitlines()]
    assert any(w and w.startswith("no live worker serves") for w in warnings)


def test_a_worker_on_another_database_is_named(
    tmp_path: Path, redis_url: str, start_workers: WorkerStarter, simulator: ManagedProcess
) -> None:
    ours = settings_for(redis_url, f"sqlite:///{tmp_path / 'ours.db'}")
    theirs = ours.model_copy(update={"database_url": f"sqlite:///{tmp_path / 'theirs.db'}"})
    start_workers(theirs)
    batch = write_batch(tmp_path, simulator, [{"model": "openai/balanced", "n": 1}])
    # Their database is seen on the first probe of the workers (~2 s), so 8 s is ample.
    done = jury(["submit", str(batch), "--wait", "--timeout", "8"], worker_env(ours), tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    said = _one_line(done.stderr)
    assert "the workers serving this batch's queues (jury-test-" in said
    assert "use another database than this command" in said and "JURY_DATABASE_URL" in said


@pytest.fixture(scope="module")
def slow_simulator(logs_dir: Path) -> Iterator[ManagedProcess]:
    process = start_simulator(logs_dir, ["--seed", "3", "--latency-ms", "400"])
    yield process
    process.stop()


def test_progress_moves_as_samples_are_stored(
    tmp_path: Path, sqlite_workers: Settings, slow_simulator: ManagedProcess
) -> None:
    # One cell of 64 samples (two workers × 8 in flight, 0.4 s a call): its verdict comes last,
    # so any progress seen before it is samples counted as they are stored.
    (tmp_path / "items.jsonl").write_text('{"id": "only", "output": "An answer."}\n')
    batch = tmp_path / "batch.yaml"
    batch.write_text(
        f"judges: [{{model: openai/balanced, n: 64, api_base: '{slow_simulator.url}'}}]\n"
        "dimensions: [relevance]\ncache: false\nitems: items.jsonl\n"
    )
    env = worker_env(sqlite_workers)
    done = jury(["submit", str(batch), "--wait", "--json", "--timeout", "120"], env, tmp_path)
    assert done.returncode == 0, done.stderr
    progress = [json.loads(line) for line in done.stdout.splitlines()[:-1]]
    partial = [p for p in progress if 0 < p["done"] < 64 and p["verdicts"] == 0]
    assert partial, [(p["done"], p["verdicts"]) for p in progress]
    assert any(p["per_second"] for p in partial) and progress[-1]["done"] == 64


def test_list_show_and_samples(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    env = worker_env(sqlite_workers)
    judges = [{"model": "openai/balanced", "n": 2}, {"model": "openai/strict", "n": 1}]
    batch = write_batch(tmp_path, simulator, judges, name="listed-batch")
    done = jury(["submit", str(batch), "--wait", "--limit", "2", "-q"], env, tmp_path)
    assert done.returncode == 0, done.stderr
    batch_id = done.stdout.strip()
    runner = CliRunner()

    listed = runner.invoke(cli, ["list"], env={**env, "COLUMNS": "160"})
    row = next(line for line in listed.output.splitlines() if batch_id in line)
    assert "listed-batch" in row and "completed" in row and "4/4 (100%)" in row
    as_json = [
        json.loads(line)
        for line in runner.invoke(cli, ["list", "--json"], env=env).output.splitlines()
    ]
    assert any(b["batch_id"] == batch_id and b["n_items"] == 2 for b in as_json)  # --limit 2

    shown = runner.invoke(cli, ["show", batch_id, "item-1"], env={**env, "COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "item item-1" in shown.output and "Answer number 1" in shown.output
    assert "relevance: final" in shown.output and "tone: final" in shown.output
    assert shown.output.count("openai/balanced #") == 4 and " ms · " in shown.output
    assert "tokens" in shown.output
    one = runner.invoke(cli, ["show", batch_id, "item-1", "--dimension", "tone"], env=env)
    assert "tone: final" in one.output and "relevance" not in one.output

    total = 2 * 2 * 3
    for fmt in ("json", "jsonl", "csv"):
        out = runner.invoke(cli, ["results", batch_id, "--samples", "--format", fmt], env=env)
        assert out.exit_code == 0, out.output
        if fmt == "json":
            rows = json.loads(out.output)["samples"]
        elif fmt == "jsonl":
            rows = [json.loads(line) for line in out.output.splitlines()]
        else:
            rows = list(csv.DictReader(io.StringIO(out.output)))
        assert len(rows) == total
        assert {r["judge"] for r in rows} == {"openai/balanced", "openai/strict"}
        assert all(r["reasoning"] for r in rows) and {r["item_id"] for r in rows} == {
            "item-0",
            "item-1",
        }

    unknown = runner.invoke(cli, ["show", batch_id, "nope"], env=env)
    assert unknown.exit_code == 2 and "has no item 'nope'" in unknown.output
    # Without --format, --samples writes csv (its default table format does not apply).
    plain = runner.invoke(cli, ["results", batch_id, "--samples"], env=env)
    assert plain.exit_code == 0, plain.output
    assert len(list(csv.DictReader(io.StringIO(plain.output)))) == total
    table = runner.invoke(cli, ["results", batch_id, "--samples", "--format", "table"], env=env)
    assert table.exit_code == 2 and "json, jsonl or csv" in table.output


def test_init_writes_a_batch_that_submits_as_is(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    # The starter's api_base is a ${JURY_SIMULATOR_URL} placeholder: expanded where the call
    # is made, so the workers need the variable (the shared ones have it; submit needs it too,
    # to check the URL).
    env = {**worker_env(sqlite_workers), "JURY_SIMULATOR_URL": simulator.url}
    made = jury(["init", "starter"], env, tmp_path)
    assert made.returncode == 0 and "batch.yaml" in made.stdout
    done = jury(["submit", "starter/batch.yaml", "--wait", "--timeout", "120"], env, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "starter — verdicts" in done.stdout
    again = jury(["init", "starter"], env, tmp_path)
    assert again.returncode == 2 and "does not overwrite" in _one_line(again.stderr)


def test_ctrl_c_leaves_the_batch_running_and_says_how_to_follow_it(
    tmp_path: Path, redis_url: str
) -> None:
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    batch = tmp_path / "batch.yaml"
    batch.write_text(
        "judges: [openai/gpt-4o-mini]\ndimensions: [relevance]\nitems: [{id: a, output: b}]\n"
    )
    process = subprocess.Popen(
        [*JURY, "submit", str(batch), "--wait"],
        env=worker_env(settings),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline()  # the id comes first, before the submission
    batch_id = first.split()[1].rstrip(":")
    assert "judgments" in process.stdout.readline()  # submitted: following it now
    process.send_signal(signal.SIGINT)
    try:
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()  # a lost Ctrl-C must not leave it following for ever
    assert process.returncode == 130, out + err
    said = _one_line(err)
    assert f"stopped following batch {batch_id}; the batch goes on" in said
    assert f"jury status {batch_id} --watch" in said and "Traceback" not in said


def test_user_mistakes_get_one_paragraph(tmp_path: Path, redis_url: str) -> None:
    settings = settings_for(redis_url, f"sqlite:///{tmp_path / 'jury.db'}")
    env = dict(settings.to_env())
    runner = CliRunner()
    batch = tmp_path / "batch.yaml"
    batch.write_text(
        "judges: [openai/gpt-4o-mini]\ndimensions: [relevance]\nitems: [{id: a, output: b}]\n"
    )

    first = runner.invoke(cli, ["submit", str(batch), "--batch-id", "mine"], env=env)
    assert first.exit_code == 0, first.output
    reused = runner.invoke(cli, ["submit", str(batch), "--batch-id", "mine"], env=env)
    assert reused.exit_code == 2 and "a batch with id 'mine' already exists" in reused.output

    mysql = runner.invoke(
        cli, ["status", "x"], env={**env, "JURY_DATABASE_URL": "mysql://u:p@h/db"}
    )
    assert mysql.exit_code == 2 and "JURY_DATABASE_URL uses 'mysql'" in _one_line(mysql.output)

    unpriced = tmp_path / "unpriced.yaml"
    unpriced.write_text(
        "judges: [openai/my-own-model]\ndimensions: [relevance]\nmax_cost_usd: 5\n"
        "items: [{id: a, output: b}]\n"
    )
    refused = runner.invoke(cli, ["submit", str(unpriced), "--dry-run"], env=env)
    assert refused.exit_code == 2 and "the price of 'openai/my-own-model' is unknown" in _one_line(
        refused.output
    )

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        flower = runner.invoke(cli, ["flower", "--port", str(port)], env=env)
    assert flower.exit_code == 2 and f"port {port}" in flower.output
    for result in (reused, mysql, refused, flower):
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert "Traceback" not in result.output
