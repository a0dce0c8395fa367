"""The LLM-judge evaluator's comparison through jury: two chatbots' answers (.NET's and
Python's) to the same prompts, one judge run 5 times (JUDGE_RUNS=5), the winner derived from
the mean scores with a tie tolerance of 0.01; reported per prompt as the evaluator does:
each side's mean ± std, the agreement with the majority winner beside jury's own, the
majority winner; win/loss/tie counts and percentages. Real Redis, workers, simulator."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from jury.cli.main import jury
from jury.local.services import ManagedProcess
from jury.schemas.pairwise import winner_of
from jury.schemas.tasks import CellRef
from jury.settings import Settings
from jury.store.engine import session_factory
from jury.store.samples import pair_judgments
from tests.integration.test_pipeline import run_batch

pytestmark = pytest.mark.integration

PROMPTS = [
    {
        "id": f"prompt-{i}",
        "input": f"How do I read a file line by line? (variant {i})",
        "output_a": f"In C#: foreach (var line in File.ReadLines(path)) {{ }} // {i}",
        "output_b": f"In Python: with open(path) as f:\n    for line in f: ...  # {i}"
        * (i % 2 + 1),
    }
    for i in range(4)
]


def test_evaluator_figures_per_prompt_and_in_total(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    spec = {
        "name": "dotnet-vs-python",
        "judges": [{"model": "openai/balanced", "n": 5, "api_base": simulator.url}],
        "dimensions": ["helpfulness"],
        "pairwise": {"tie_tolerance": 0.01, "names": ["dotnet", "python"]},
        "items": PROMPTS,
    }
    path = tmp_path / "batch.yaml"
    path.write_text(yaml.safe_dump(spec))
    batch_id = run_batch(sqlite_workers, path)
    sessions = session_factory(sqlite_workers.database_url)
    runner = CliRunner()
    env = sqlite_workers.to_env()
    document = json.loads(
        runner.invoke(jury, ["results", batch_id, "--format", "json"], env=env).output
    )
    winners: Counter[str] = Counter()
    for record in document["results"]:
        outcome = record["pairwise"]
        runs = list(
            pair_judgments(sessions, CellRef(batch_id, record["item_id"], "helpfulness")).values()
        )
        assert len(runs) == 5
        a = [statistics.fmean(r.scores_a) for r in runs]
        b = [statistics.fmean(r.scores_b) for r in runs]
        # Mean ± std per side; the winner from the very scores shown.
        assert outcome["score_a"] == pytest.approx(statistics.fmean(a))
        assert outcome["score_b"] == pytest.approx(statistics.fmean(b))
        assert outcome["std_a"] == pytest.approx(statistics.stdev(a))
        assert outcome["std_b"] == pytest.approx(statistics.stdev(b))
        assert outcome["winner"] == winner_of(outcome["score_a"] - outcome["score_b"], 0.01)
        # The evaluator's agreement: the share of runs naming the most frequent winner.
        run_winners = Counter(winner_of(x - y, 0.01) for x, y in zip(a, b, strict=True))
        (top, n_top), *rest = run_winners.most_common()
        if rest and rest[0][1] == n_top:  # no single most frequent winner: a tie between them
            assert outcome["majority_tied_between"] == sorted(
                (w for w, n in run_winners.items() if n == n_top), key="ABtie".index
            )
            top = "tie"
        assert outcome["majority_winner"] == top and outcome["n_majority"] == n_top
        assert outcome["majority_agreement_pct"] == pytest.approx(100 * n_top / 5)
        assert outcome["agreement_pct"] == pytest.approx(100 * run_winners[outcome["winner"]] / 5)
        named = {"A": "dotnet", "B": "python", "tie": "tie"}[outcome["winner"]]
        assert (outcome["name_a"], outcome["name_b"], outcome["winner_name"]) == (
            "dotnet",
            "python",
            named,
        )
        winners[outcome["winner"]] += 1

    totals = document["summary"]["pairwise"]["overall"]
    assert (totals["wins_a"], totals["wins_b"], totals["ties"]) == (
        winners["A"],
        winners["B"],
        winners["tie"],
    )
    assert totals["wins_a_pct"] == pytest.approx(100 * winners["A"] / 4)
    assert totals["wins_a_pct"] + totals["wins_b_pct"] + totals["ties_pct"] == pytest.approx(100)

    table = runner.invoke(jury, ["results", batch_id, "--format", "csv"], env=env).output
    assert "std_a,std_b,majority_winner,majority_agreement_pct" in table.splitlines()[0]
