"""Issue 13 end to end: a panel whose judges answer under different scoring templates (likert,
true/false/uncertain, continuous), one with its own prompt template, the batch's template with
an item metadata field, and the plan's pass vote. Real parts: Redis, worker processes, the
simulator over HTTP (one of its judges garbles its vote). Stored values are checked against
the rules of docs/judges.md: each sample's score on the criterion's scale, its vote, and each
record's share of passing samples."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from jury.cli.main import jury
from jury.local.services import ManagedProcess, start_simulator
from jury.schemas.tasks import CellRef
from jury.settings import Settings
from jury.store.cells import iter_verdicts
from jury.store.engine import session_factory
from jury.store.samples import list_samples
from tests.conftest import SIMULATOR_SEED, worker_env
from tests.integration.test_pipeline import run_batch

pytestmark = pytest.mark.integration

GARBLED = "openai/balanced@garbled"
ITEMS = [
    {
        "id": f"rec-{i}",
        "input": f"Recommend {i + 1} films.",
        "output": f"Film {i}: a {{rubric}} thriller. " * (i + 1),
        "metadata": {"profile": f"viewer {i} likes {{output}} noir"},
    }
    for i in range(4)
]
BATCH_TEMPLATE = (
    "Criterion: {criterion}\nRubric: {rubric}\nScale: {scale}\n"
    "The viewer: {metadata.profile}\nTheir request: {input}\nThe recommendations: {output}"
)
JUDGE_TEMPLATE = "Criterion: {criterion} ({rubric})\nScale: {scale}\nJudge this: {output}"


@pytest.fixture(scope="module")
def voting_simulator(logs_dir: Path) -> Iterator[ManagedProcess]:
    # The simulator sees the model without its `openai/` prefix.
    options = ["--seed", str(SIMULATOR_SEED), "--hostile", "balanced@garbled=garbled-vote"]
    process = start_simulator(logs_dir, options)
    yield process
    process.stop()


def write_batch(folder: Path, url: str) -> Path:
    judges = [
        {"model": "openai/balanced@likert", "n": 2},
        {"model": "openai/lenient@tfu", "n": 2, "scoring": "true_false_uncertain"},
        {
            "model": "openai/strict@cont",
            "n": 2,
            "scoring": "continuous",
            "prompt_template": JUDGE_TEMPLATE,
        },
        {"model": GARBLED, "n": 1},
    ]
    spec = {
        "name": "judge-prompts",
        "judges": [{**judge, "api_base": url} for judge in judges],
        "dimensions": [
            {"name": "tone", "description": "Is it kind?", "scale": {"min": 1, "max": 10}}
        ],
        "pass_vote": True,
        "prompt_template": BATCH_TEMPLATE,
        "items": "items.jsonl",
    }
    (folder / "items.jsonl").write_text("".join(json.dumps(item) + "\n" for item in ITEMS))
    path = folder / "batch.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_a_mixed_template_panel_votes_and_aggregates_on_one_scale(
    tmp_path: Path, sqlite_workers: Settings, voting_simulator: ManagedProcess
) -> None:
    settings = sqlite_workers
    batch_id = run_batch(settings, write_batch(tmp_path, voting_simulator.url), timeout=60)
    sessions = session_factory(settings.database_url)
    records = list(iter_verdicts(sessions, batch_id))
    assert len(records) == len(ITEMS)
    middle = 5.5  # the scale 1..10's middle: the simulator votes pass from there
    for record in records:
        samples = list_samples(sessions, CellRef(batch_id, record.item_id, "tone"))
        assert len(samples) == 7 and all(s.ok for s in samples)
        by_judge: dict[str, list[float]] = {}
        for s in samples:
            assert s.score is not None and 1 <= s.score <= 10
            by_judge.setdefault(s.judge.split("@")[1], []).append(s.score)
            if s.judge == GARBLED:
                assert s.vote is None  # garbled: no vote, the score still counts
            else:
                assert s.vote == (s.score >= middle)  # the vote each judge gave, stored
        # true/false/uncertain lands on 1, 5.5 or 10; continuous on 1 + x/100·9 for whole x.
        assert set(by_judge["tfu"]) <= {1.0, 5.5, 10.0}
        assert all(
            abs((v - 1) / 9 * 100 - round((v - 1) / 9 * 100)) < 1e-6 for v in by_judge["cont"]
        )
        assert record.llm_evaluations[GARBLED].samples == by_judge["garbled"]
        # All four judges aggregate together on the criterion's scale.
        means = [sum(v) / len(v) for v in by_judge.values()]
        assert record.consensus_metrics.final_score == pytest.approx(sum(means) / len(means))
        vote = record.pass_vote
        assert vote is not None
        voted = [s.vote for s in samples if s.vote is not None]
        assert (vote.n_pass, vote.n_fail, vote.n_missing) == (
            voted.count(True),
            voted.count(False),
            1,
        )
        assert vote.share is not None
        assert vote.share == pytest.approx(voted.count(True) / 6)
        assert vote.passed_by_vote == (vote.share >= 0.5)
        assert vote.by_judge[GARBLED] is None
    assert {r.pass_vote.passed_by_vote for r in records if r.pass_vote} == {True, False}

    env = worker_env(settings)
    runner = CliRunner()
    document = json.loads(
        runner.invoke(jury, ["results", batch_id, "--format", "json"], env=env).output
    )
    first = document["results"][0]
    assert first["pass_vote"]["n_missing"] == 1 and "passed" in first
    rows = list(
        csv.DictReader(
            io.StringIO(
                runner.invoke(jury, ["results", batch_id, "--format", "csv"], env=env).output
            )
        )
    )
    assert [r["passed_by_vote"] for r in rows] == [str(r.pass_vote.passed_by_vote) for r in records]  # type: ignore[union-attr]
    assert {r["votes_missing"] for r in rows} == {"1"}
    table = runner.invoke(jury, ["results", batch_id], env=env).output
    assert "· vote" in table
    shown = runner.invoke(jury, ["show", batch_id, "rec-0"], env=env).output
    assert "judges' vote" in shown and ("· pass" in shown or "· fail" in shown)
    report = tmp_path / "report.html"
    made = runner.invoke(jury, ["report", batch_id, "-o", str(report)], env=env)
    assert made.exit_code == 0, made.output
    html = report.read_text()
    assert "→ pass" in html or "→ fail" in html
    assert "1 missing" in html


def test_a_combined_call_votes_on_each_criterion(
    tmp_path: Path, sqlite_workers: Settings, voting_simulator: ManagedProcess
) -> None:
    url = voting_simulator.url
    spec = {
        "name": "combined-votes",
        "mode": "combined",
        "pass_vote": True,
        "judges": [
            {"model": "openai/balanced@combined", "n": 2, "api_base": url},
            {"model": GARBLED, "n": 1, "api_base": url},
        ],
        "dimensions": [
            "relevance",
            {"name": "tone", "description": "Is it kind?", "scale": {"min": 1, "max": 10}},
        ],
        "items": ITEMS,
    }
    path = tmp_path / "batch.yaml"
    path.write_text(yaml.safe_dump(spec))
    settings = sqlite_workers
    batch_id = run_batch(settings, path, timeout=60)
    sessions = session_factory(settings.database_url)
    records = list(iter_verdicts(sessions, batch_id))
    assert len(records) == 2 * len(ITEMS)
    middles = {"relevance": 3.0, "tone": 5.5}
    for record in records:
        cell = CellRef(batch_id, record.item_id, record.criterion_id)
        samples = list_samples(sessions, cell)
        assert len(samples) == 3 and all(s.ok for s in samples)
        for s in samples:
            assert s.score is not None
            expected = None if s.judge == GARBLED else s.score >= middles[record.criterion_id]
            assert s.vote == expected
        vote = record.pass_vote
        assert vote is not None and vote.n_missing == 1 and vote.n_pass + vote.n_fail == 2
        assert vote.share == pytest.approx(vote.n_pass / 2)
