"""Items from CSV, a JSON array and Parquet, with a field mapping, judged end to end by real
workers (issue 12, part 7): the records carry the ids the mapping named, and the judges saw
the mapped text; the same text from each format is the same call, so the scores agree."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from jury.local.services import ManagedProcess
from jury.settings import Settings
from jury.store.cells import iter_verdicts
from jury.store.engine import session_factory
from jury.store.repository import load_item
from tests.integration.test_pipeline import run_batch

pytestmark = pytest.mark.integration

ROWS = [
    {"qid": f"q{n}", "question": f"Question {n}?", "answer": f"Answer {n} " * (n + 1), "x": n}
    for n in range(4)
]
FIELDS = {"id": "qid", "input": "question", "output": "answer"}


def write_items(folder: Path, fmt: str) -> str:
    name = f"answers.{fmt}"
    if fmt == "csv":
        with (folder / name).open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(ROWS[0]))
            writer.writeheader()
            writer.writerows(ROWS)
    elif fmt == "json":
        (folder / name).write_text(json.dumps(ROWS))
    else:
        pq.write_table(pa.Table.from_pylist(ROWS), folder / name)
    return name


def test_csv_json_and_parquet_items_are_judged_through_their_mapping(
    tmp_path: Path, sqlite_workers: Settings, simulator: ManagedProcess
) -> None:
    scores: dict[str, dict[str, float | None]] = {}
    for fmt in ("csv", "json", "parquet"):
        folder = tmp_path / fmt
        folder.mkdir()
        spec = {
            "name": f"from-{fmt}",
            "judges": [{"model": "openai/balanced", "n": 1, "api_base": simulator.url}],
            "dimensions": ["relevance"],
            "items": {"path": write_items(folder, fmt), "fields": FIELDS},
        }
        batch = folder / "batch.yaml"
        batch.write_text(yaml.safe_dump(spec))
        batch_id = run_batch(sqlite_workers, batch)
        sessions = session_factory(sqlite_workers.database_url)
        verdicts = list(iter_verdicts(sessions, batch_id))
        scores[fmt] = {v.item_id: v.consensus_metrics.final_score for v in verdicts}
        stored = load_item(sessions, batch_id, "q2")  # what the judges were shown
        assert (stored.input, stored.output, stored.metadata) == (
            "Question 2?",
            ROWS[2]["answer"],
            {},
        )
    assert list(scores["csv"]) == [r["qid"] for r in ROWS]
    assert all(score is not None for score in scores["csv"].values())
    assert scores["csv"] == scores["json"] == scores["parquet"]
