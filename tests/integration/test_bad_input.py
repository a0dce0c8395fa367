"""Every file of the bad-input corpus (tests/data/bad) through `jury submit`: a one-paragraph
error naming the file and the line or field, exit 2, no traceback, and nothing enqueued or
recorded."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest
from click.testing import CliRunner

from jury.cli.main import jury
from jury.settings import Settings
from tests.conftest import queued_messages

BAD = Path(__file__).resolve().parents[1] / "data" / "bad"
EXPECTED = {
    "duplicate_ids.yaml": (
        "duplicate_ids.jsonl",
        "line 4: duplicate item id 'dup' (first on line 2)",
    ),
    "empty_panel.yaml": ("empty_panel.yaml", "judges: List should have at least 1 item"),
    "item_missing_output.yaml": (
        "item_missing_output.jsonl",
        "line 2: item.output: Field required",
    ),
    "item_too_long.yaml": ("item_too_long.jsonl", "over max_item_chars (20)"),
    "missing_items.yaml": ("missing_items.yaml", "items: missing"),
    "missing_items_file.yaml": ("does_not_exist.jsonl", "the items file does not exist"),
    "n_zero.yaml": (
        "n_zero.yaml",
        "judges[0].n: Input should be greater than or equal to 1 (got 0)",
    ),
    "no_items.yaml": ("no_items.jsonl", "the items file holds no items"),
    "non_utf8.yaml": ("non_utf8.jsonl", "line 3: not valid UTF-8 text"),
    "scale_order.yaml": ("scale_order.yaml", "scale min (5) must be below max (1)"),
    "top_level_list.yaml": ("top_level_list.yaml", "the top level must be a mapping"),
    "unknown_criterion.yaml": ("unknown_criterion.yaml", "unknown criterion 'sparkle'"),
    "unknown_field.yaml": (
        "unknown_field.yaml",
        "judges[0].temprature: Extra inputs are not permitted",
    ),
    "unknown_placeholder.yaml": (
        "unknown_placeholder.yaml",
        "the prompt template uses unknown placeholders {profile}",
    ),
    "unset_env.yaml": (
        "unset_env.yaml",
        "environment variable JURY_TEST_UNSET_VAR_7F3A is not set",
    ),
    "yaml_syntax.yaml": ("yaml_syntax.yaml", "line 5, column 6: not valid YAML"),
    "json_syntax.json": ("json_syntax.json", "line 3, column 31: not valid JSON"),
    # The multi-LLM judge plan's test cases (producer.test_cases, schemas.item_dimensions).
    "unknown_focus_area.yaml": (
        "unknown_focus_area.jsonl",
        "line 2: item '02_sparkly': focus_areas names 'sparkle', 'glitter', which is neither",
    ),
    "conflicting_criteria.yaml": (
        "conflicting_criteria.jsonl",
        "line 2: item 'b': custom_criteria.warmth: item 'a' defines a criterion 'warmth' "
        "differently",
    ),
    "test_case_without_response.yaml": (
        "test_case_without_response.items",
        "[0]: test case '01_cold_start': no output to judge; give the system's answer as "
        "`response`",
    ),
}


def test_the_corpus_is_covered() -> None:
    corpus = {p.name for p in BAD.iterdir() if p.suffix in (".yaml", ".json")}
    assert corpus == set(EXPECTED)


def submit_refused(batch: Path, redis_url: str, tmp_path: Path) -> str:
    queue = f"jury-bad-{secrets.token_hex(4)}"
    database = tmp_path / "jury.db"
    env = {
        "JURY_BROKER_URL": redis_url,
        "JURY_QUEUE": queue,
        "JURY_DATABASE_URL": f"sqlite:///{database}",
    }
    result = CliRunner().invoke(jury, ["submit", str(batch)], env=env)
    assert queued_messages(Settings(broker_url=redis_url, queue=queue)) == []  # nothing enqueued
    assert not database.exists()  # nothing recorded
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    return result.output


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bad_batch_file_is_refused(name: str, redis_url: str, tmp_path: Path) -> None:
    where, what = EXPECTED[name]
    output = " ".join(submit_refused(BAD / name, redis_url, tmp_path).split())
    assert where in output and what in output
    assert "nothing was enqueued" in output


def test_fifty_megabyte_item_is_refused_without_loading_it(redis_url: str, tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    with items.open("w") as handle:
        handle.write(json.dumps({"id": "ok", "output": "fine"}) + "\n")
        handle.write('{"id": "huge", "output": "' + "x" * 50_000_000 + '"}\n')
    batch = tmp_path / "batch.yaml"
    batch.write_text("judges: [openai/gpt-4o-mini]\ndimensions: [relevance]\nitems: items.jsonl\n")
    output = " ".join(submit_refused(batch, redis_url, tmp_path).split())
    assert "items.jsonl" in output and "line 2" in output and "far over max_item_chars" in output


def test_unknown_judge_is_refused(redis_url: str, tmp_path: Path) -> None:
    batch = tmp_path / "batch.yaml"
    batch.write_text(
        "judges: [openai/gpt-4o-mini, nosuchprovider/judge]\ndimensions: [relevance]\n"
        "items: [{id: a, output: b}]\n"
    )
    output = " ".join(submit_refused(batch, redis_url, tmp_path).split())
    assert "judges[1].model: unknown provider 'nosuchprovider'" in output
