"""Items from the files people have (issue 12, part 7): JSON Lines, a JSON array, CSV, TSV and
Parquet, with a mapping from item fields to the file's columns; each problem one paragraph
naming the file and the line or row."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jury.batchfile.loading import load_batch
from jury.errors import BatchFileError

ROWS = [
    {"qid": "q1", "question": "How do I reset it?", "answer": "Use the link.", "team": "a"},
    {"qid": "q2", "question": "Where is my order?", "answer": "It ships today.", "team": "b"},
]
MAPPING = {"id": "qid", "output": "answer", "input": "question"}


def batch(tmp_path: Path, items: Any) -> Path:
    path = tmp_path / "batch.yaml"
    spec = json.dumps(items)  # YAML reads JSON
    path.write_text(f"judges: [openai/x]\ndimensions: [relevance]\nitems: {spec}\n")
    return path


def write_csv(path: Path, rows: list[dict[str, Any]], delimiter: str = ",") -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), delimiter=delimiter)
        writer.writeheader()
        writer.writerows(rows)
    return path


def loaded(path: Path) -> list[tuple[str, str | None, str | None]]:
    source = load_batch(path)
    items = list(source.items())
    assert source.stats.count == len(items)
    return [(i.id, i.input, i.output) for i in items]


EXPECTED = [
    ("q1", "How do I reset it?", "Use the link."),
    ("q2", "Where is my order?", "It ships today."),
]


def test_csv_with_a_field_mapping(tmp_path: Path) -> None:
    write_csv(tmp_path / "answers.csv", ROWS)
    assert loaded(batch(tmp_path, {"path": "answers.csv", "fields": MAPPING})) == EXPECTED


def test_tsv_with_a_field_mapping(tmp_path: Path) -> None:
    write_csv(tmp_path / "answers.tsv", ROWS, delimiter="\t")
    assert loaded(batch(tmp_path, {"path": "answers.tsv", "fields": MAPPING})) == EXPECTED


def test_json_array_with_a_field_mapping(tmp_path: Path) -> None:
    (tmp_path / "answers.json").write_text(json.dumps(ROWS))
    assert loaded(batch(tmp_path, {"path": "answers.json", "fields": MAPPING})) == EXPECTED


def test_jsonl_with_a_field_mapping(tmp_path: Path) -> None:
    (tmp_path / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    assert loaded(batch(tmp_path, {"path": "answers.jsonl", "fields": MAPPING})) == EXPECTED


def test_parquet_with_a_field_mapping(tmp_path: Path) -> None:
    pq.write_table(pa.Table.from_pylist(ROWS), tmp_path / "answers.parquet")
    assert loaded(batch(tmp_path, {"path": "answers.parquet", "fields": MAPPING})) == EXPECTED


def test_parquet_with_item_columns_and_structures(tmp_path: Path) -> None:
    rows = [
        {"id": 7, "output": "x", "metadata": {"team": "a"}, "focus_areas": ["relevance"]},
        {"id": 8, "output": "y", "metadata": None, "focus_areas": None},
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "items.bin")  # found by its bytes
    items = list(load_batch(batch(tmp_path, "items.bin")).items())
    assert [(i.id, i.metadata, i.focus_areas) for i in items] == [
        ("7", {"team": "a"}, ["relevance"]),
        ("8", {}, []),
    ]


def test_json_array_found_by_its_first_character(tmp_path: Path) -> None:
    (tmp_path / "items.txt").write_text('\ufeff [{"id": "a", "output": "x"}]')
    assert loaded(batch(tmp_path, "items.txt")) == [("a", None, "x")]


def test_csv_cells_empty_structured_and_bom(tmp_path: Path) -> None:
    (tmp_path / "items.csv").write_text(
        '\ufeffid,output,reference,metadata\na,"multi\nline",,"{""k"": [1, 2]}"\n',
        encoding="utf-8",
    )
    [item] = load_batch(batch(tmp_path, "items.csv")).items()
    assert (item.output, item.reference, item.metadata) == ("multi\nline", None, {"k": [1, 2]})


def refused(path: Path) -> str:
    with pytest.raises(BatchFileError) as info:
        load_batch(path)
    return " ".join(str(info.value).split())


@pytest.mark.parametrize(
    ("items", "content", "expected"),
    [
        ({"path": "a.csv", "fields": {"output": "anwser"}}, None, "no column anwser (for output)"),
        ({"path": "a.csv", "fields": {"outptu": "answer"}}, None, "'outptu' is not an item field"),
        ({"path": "a.csv", "colums": {}}, None, "unknown keys ['colums']"),
        (
            {"fields": {"output": "answer"}},
            None,
            "items.path: the path of the items file is required",
        ),
        ({"path": "a.csv", "format": "xlsx"}, None, "'xlsx' is not one of"),
        ("a.csv", None, "the columns qid, question, answer, team are not item fields"),
        ("b.csv", "id,output\na,x,extra\n", "line 2: 3 cells, but the header names 2"),
        ("b.csv", "", "the file has no header row"),
        ("b.csv", "id,id\na,b\n", "appear twice in the header"),
        ("b.csv", "id,output,metadata\na,x,{oops\n", "line 2: column metadata: not valid JSON"),
        ({"path": "b.json", "format": "json"}, '{"id": "a"}', "holds one array of objects"),
        ("b.json", '[{"id": "a", "output": "x"}, 3]', "[1]: an item must be a JSON object"),
        ("b.json", "[1,", "line 1, column 4: not valid JSON"),
        ("b.parquet", "PAR1 but not really", "not a Parquet file"),
    ],
)
def test_bad_items_files_get_one_paragraph(
    tmp_path: Path, items: Any, content: str | None, expected: str
) -> None:
    write_csv(tmp_path / "a.csv", ROWS)
    if content is not None:
        (tmp_path / (items if isinstance(items, str) else items["path"])).write_text(content)
    assert expected in refused(batch(tmp_path, items))


def test_a_bad_row_names_its_line_and_the_others_are_still_checked(tmp_path: Path) -> None:
    (tmp_path / "items.csv").write_text("id,output\na,x\nb,\nc,z\na,w\n")
    message = refused(batch(tmp_path, "items.csv"))
    assert "line 3: item.output: Field required" in message
    assert "line 5: duplicate item id 'a' (first on line 2)" in message


def test_parquet_without_pyarrow_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pq.write_table(pa.Table.from_pylist(ROWS), tmp_path / "answers.parquet")
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # import fails as if missing
    message = refused(batch(tmp_path, {"path": "answers.parquet", "fields": MAPPING}))
    assert "pip install 'jury-panel[parquet]'" in message and "answers.parquet" in message


def test_the_csv_example_of_the_batch_file_page_loads_as_written(tmp_path: Path) -> None:
    """docs/batch-file.md "Items files": its CSV and its `items:` line, as written."""
    from tests.conftest import ROOT

    page = (ROOT / "docs" / "batch-file.md").read_text()
    section = page.split("### Items files", 1)[1].split("\n### ", 1)[0]
    csv_text = section.split("```csv\n", 1)[1].split("```", 1)[0]
    items_line = section.split("```yaml\n", 1)[1].split("```", 1)[0].strip()
    (tmp_path / "answers.csv").write_text(csv_text)
    path = tmp_path / "batch.yaml"
    path.write_text(f"judges: [openai/x]\ndimensions: [relevance]\n{items_line}\n")
    assert loaded(path) == [
        ("q1", "How do I reset my password?", "Use 'Forgot password' on the sign-in page."),
        ("q2", "Can I change my plan?", "Yes: Settings → Plan."),
    ]
    # Without `fields` its own column names are not item fields: refused, naming them.
    path.write_text("judges: [openai/x]\ndimensions: [relevance]\nitems: answers.csv\n")
    with pytest.raises(
        BatchFileError, match="the columns qid, question, answer, team are not item"
    ):
        load_batch(path)
