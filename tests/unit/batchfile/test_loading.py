"""producer.loading.load_batch: good batch files load, and every broken one is refused with a
message that says which file and which line or field is wrong."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from jury.batchfile.loading import load_batch
from jury.errors import BatchFileError
from jury.schemas.batch import PROVIDER_DEFAULT_MODELS
from jury.schemas.placeholders import expand_fields

DATA = Path(__file__).resolve().parents[2] / "data"
BAD = DATA / "bad"
UNSET = "JURY_TEST_UNSET_VAR_7F3A"


def refused(path: Path) -> str:
    with pytest.raises(BatchFileError) as info:
        load_batch(path)
    return str(info.value)


# --- good files -----------------------------------------------------------------------------


def test_yaml_batch_with_jsonl_items() -> None:
    source = load_batch(DATA / "good_batch.yaml")
    batch = source.config
    assert batch.name == "good-yaml"
    assert [j.name for j in batch.panel] == ["openai/gpt-4o-mini", "balanced"]
    assert len(batch.judges) == 3  # the disabled one is kept, just not on the panel
    mini = batch.judge("openai/gpt-4o-mini")
    assert (mini.n, mini.temperature, mini.weight, mini.rpm, mini.tpm) == (3, 0.5, 2.0, 500, 200000)
    balanced = batch.judge("balanced")
    assert balanced.api_base == "http://127.0.0.1:8011/v1"
    assert balanced.api_key_env == "JURY_TEST_KEY"
    # q2's focus_areas choose the built-in `accuracy`, added for the items that name it.
    assert [(d.name, d.item_only) for d in batch.dimensions] == [
        ("relevance", False),
        ("tone", False),
        ("accuracy", True),
    ]
    assert batch.per_item_dimensions
    assert source.stats.cells == 2 + 1 + 2
    assert batch.dimension("tone").resolved_threshold == 3.5
    assert batch.dimension("relevance").description  # filled from the built-in
    assert batch.aggregation.within_model == "median"
    assert batch.aggregation.across_models == "weighted_mean"
    assert batch.aggregation.consensus_threshold == 1.2

    assert source.inline_items is None
    assert source.items_path == (DATA / "good_items.jsonl").resolve()
    assert source.stats.count == 3
    items = list(source.items())
    assert [i.id for i in items] == ["q1", "q2", "3"]  # file order; numeric id as text
    assert items[1].reference == "Orders ship within 2 days."
    assert items[1].focus_areas == ["accuracy"]
    assert items[2].metadata == {"source": "export"}
    assert items[2].prompt_hint == "Be strict."
    expected_chars = sum(
        len(text)
        for item in items
        for text in (item.input, item.output, item.reference, item.context, item.prompt_hint)
        if text
    )
    assert source.stats.text_chars == expected_chars


def test_items_can_be_streamed_twice() -> None:
    source = load_batch(DATA / "good_batch.yaml")
    assert [i.id for i in source.items()] == [i.id for i in source.items()]


def test_json_batch_with_inline_items() -> None:
    source = load_batch(DATA / "good_batch.json")
    batch = source.config
    assert batch.name == "good-json"
    assert [j.model for j in batch.panel] == [PROVIDER_DEFAULT_MODELS["openai"]]
    assert batch.panel[0].temperature == 0.3
    assert batch.panel[0].n == 2
    assert batch.aggregation.consensus_threshold == 1.0
    assert [d.name for d in batch.dimensions] == ["accuracy", "tone"]
    assert source.items_path is None
    assert [i.id for i in source.items()] == ["a", "b", "c"]
    assert source.stats.count == 3
    assert source.stats.text_chars == len("first") + len("second") + len("a question") + len(
        "third"
    )


def test_items_stream_in_file_order(tmp_path: Path) -> None:
    ids = [f"item-{n:03d}" for n in (7, 3, 9, 1, 5, 2, 8, 0, 6, 4)]
    (tmp_path / "items.jsonl").write_text(
        "\n".join(json.dumps({"id": i, "output": f"text {i}"}) for i in ids) + "\n"
    )
    batch = tmp_path / "batch.yaml"
    batch.write_text("judges: [openai/x]\ndimensions: [relevance]\nitems: items.jsonl\n")
    source = load_batch(batch)
    assert [i.id for i in source.items()] == ids
    assert [i.output for i in source.items()] == [f"text {i}" for i in ids]


def test_items_path_is_relative_to_the_batch_file(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "items.jsonl").write_text('{"id": "only", "output": "x"}\n')
    batch = tmp_path / "batch.yaml"
    batch.write_text("judges: [openai/x]\ndimensions: [relevance]\nitems: sub/items.jsonl\n")
    assert [i.id for i in load_batch(str(batch)).items()] == ["only"]


# --- ${VAR} placeholders: stored as written, checked expanded ------------------------------


@pytest.fixture(autouse=True)
def plain_test_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The egress policy (jury.schemas.egress): the variables these batches' placeholders
    take hold no secret, and the addresses they name may be reached."""
    monkeypatch.setenv("JURY_PLAIN_VARS", "JURY_TEST_SIM_URL JURY_TEST_HOST")
    monkeypatch.setenv("JURY_EGRESS_ALLOW", "loopback 10.0.0.5:9000")


def write_env_batch(tmp_path: Path, api_base: str) -> Path:
    path = tmp_path / "batch.yaml"
    path.write_text(
        "judges:\n"
        "  - model: openai/balanced\n"
        f"    api_base: {api_base}\n"
        "dimensions: [relevance]\n"
        "items: [{id: a, output: x}]\n"
    )
    return path


def expanded_api_base(path: Path) -> str | None:
    """The api_base as a worker on this machine would call it; the stored one is as written."""
    judge = load_batch(path).config.panel[0]
    return expand_fields(judge, os.environ)[0].api_base


def test_env_default_is_used_when_unset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JURY_TEST_SIM_URL", raising=False)
    written = "${JURY_TEST_SIM_URL:-http://127.0.0.1:8011/v1}"
    path = write_env_batch(tmp_path, written)
    assert load_batch(path).config.panel[0].api_base == written
    assert expanded_api_base(path) == "http://127.0.0.1:8011/v1"


def test_env_value_wins_over_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JURY_TEST_SIM_URL", "http://10.0.0.5:9000/v1")
    path = write_env_batch(tmp_path, "${JURY_TEST_SIM_URL:-http://127.0.0.1:8011/v1}")
    assert expanded_api_base(path) == "http://10.0.0.5:9000/v1"


def test_env_without_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JURY_TEST_HOST", "judge.example")
    path = write_env_batch(tmp_path, "https://${JURY_TEST_HOST}/v1")
    assert load_batch(path).config.panel[0].api_base == "https://${JURY_TEST_HOST}/v1"
    assert expanded_api_base(path) == "https://judge.example/v1"


def test_expanded_value_must_be_a_url_and_is_not_echoed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JURY_TEST_HOST", "not-a-url-secret")
    message = refused(write_env_batch(tmp_path, "${JURY_TEST_HOST}"))
    assert "judges[0]" in message and "http(s) URL" in message
    assert "not-a-url-secret" not in message


def test_unset_env_without_default_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(UNSET, raising=False)
    message = refused(BAD / "unset_env.yaml")
    assert "unset_env.yaml" in message
    assert "judges[0].api_base" in message
    assert UNSET in message


# --- broken files ---------------------------------------------------------------------------


def test_bad_yaml_syntax_names_the_line() -> None:
    message = refused(BAD / "yaml_syntax.yaml")
    assert "yaml_syntax.yaml" in message
    assert re.search(r"line [45]\b", message)
    assert "not valid YAML" in message


def test_bad_json_names_the_line() -> None:
    message = refused(BAD / "json_syntax.json")
    assert "json_syntax.json" in message
    assert "line 3" in message


def test_top_level_must_be_a_mapping() -> None:
    message = refused(BAD / "top_level_list.yaml")
    assert "top_level_list.yaml" in message
    assert "mapping" in message


def test_empty_batch_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert "mapping" in refused(path)


def test_missing_batch_file() -> None:
    message = refused(BAD / "no_such_batch.yaml")
    assert "no_such_batch.yaml" in message
    assert "does not exist" in message


def test_unknown_criterion_names_the_field() -> None:
    message = refused(BAD / "unknown_criterion.yaml")
    assert "unknown_criterion.yaml" in message
    assert "dimensions[1]" in message
    assert "sparkle" in message


def test_unknown_field_typo_is_refused() -> None:
    message = refused(BAD / "unknown_field.yaml")
    assert "unknown_field.yaml" in message
    assert "judges[0].temprature" in message


def test_empty_panel_is_refused() -> None:
    message = refused(BAD / "empty_panel.yaml")
    assert "empty_panel.yaml" in message
    assert "judges" in message


def test_n_zero_is_refused() -> None:
    message = refused(BAD / "n_zero.yaml")
    assert "n_zero.yaml" in message
    assert "judges[0].n" in message


def test_duplicate_item_ids_name_both_lines() -> None:
    message = refused(BAD / "duplicate_ids.yaml")
    assert "duplicate_ids.jsonl" in message
    assert "'dup'" in message
    assert "line 4" in message
    assert "line 2" in message


def test_third_duplicate_names_the_first_line(tmp_path: Path) -> None:
    lines = [{"id": "d", "output": "1"}, {"id": "e", "output": "2"}, {"id": "d", "output": "3"}]
    lines.append({"id": "d", "output": "4"})
    (tmp_path / "items.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    batch = tmp_path / "batch.yaml"
    batch.write_text("judges: [openai/x]\ndimensions: [relevance]\nitems: items.jsonl\n")
    message = refused(batch)
    assert "line 3: duplicate item id 'd' (first on line 1)" in message
    assert "line 4: duplicate item id 'd' (first on line 1)" in message


def test_duplicate_inline_item_ids(tmp_path: Path) -> None:
    path = tmp_path / "batch.json"
    items = [{"id": "a", "output": "x"}, {"id": "a", "output": "y"}]
    path.write_text(json.dumps({"judges": ["openai/x"], "dimensions": ["depth"], "items": items}))
    message = refused(path)
    assert "batch.json" in message
    assert "items[1]" in message
    assert "duplicate item id 'a'" in message


def test_non_utf8_line_is_named() -> None:
    message = refused(BAD / "non_utf8.yaml")
    assert "non_utf8.jsonl" in message
    assert "line 3" in message
    assert "UTF-8" in message


def test_non_utf8_batch_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"name: ok\njudges: [openai/x]\nname2: caf\xe9\n")
    message = refused(path)
    assert "latin1.yaml" in message
    assert "line 3" in message


def test_item_over_max_item_chars() -> None:
    message = refused(BAD / "item_too_long.yaml")
    assert "item_too_long.jsonl" in message
    assert "line 2" in message
    assert "max_item_chars" in message
    assert "'long'" in message


def test_inline_item_over_max_item_chars(tmp_path: Path) -> None:
    path = tmp_path / "batch.json"
    data = {
        "judges": ["openai/x"],
        "dimensions": ["depth"],
        "max_item_chars": 10,
        "items": [{"id": "a", "output": "short"}, {"id": "b", "output": "much too long"}],
    }
    path.write_text(json.dumps(data))
    message = refused(path)
    assert "items[1]" in message
    assert "max_item_chars" in message


def test_huge_line_is_refused_before_parsing(tmp_path: Path) -> None:
    (tmp_path / "items.jsonl").write_text(json.dumps({"id": "big", "output": "z" * 70_000}) + "\n")
    batch = tmp_path / "batch.yaml"
    batch.write_text(
        "judges: [openai/x]\ndimensions: [relevance]\nmax_item_chars: 10\nitems: items.jsonl\n"
    )
    message = refused(batch)
    assert "line 1" in message
    assert "max_item_chars" in message


def test_scale_min_not_below_max() -> None:
    message = refused(BAD / "scale_order.yaml")
    assert "scale_order.yaml" in message
    assert "dimensions[0].scale" in message


def test_missing_items_file() -> None:
    message = refused(BAD / "missing_items_file.yaml")
    assert "does_not_exist.jsonl" in message
    assert "does not exist" in message


def test_missing_items_key() -> None:
    message = refused(BAD / "missing_items.yaml")
    assert "missing_items.yaml" in message
    assert "items: missing" in message


def test_missing_items_is_reported_with_config_problems(tmp_path: Path) -> None:
    path = tmp_path / "batch.yaml"
    path.write_text("judges: []\ndimensions: [relevance]\n")
    message = refused(path)
    assert "judges" in message
    assert "items: missing" in message


def test_item_line_missing_output() -> None:
    message = refused(BAD / "item_missing_output.yaml")
    assert "item_missing_output.jsonl" in message
    assert "line 2" in message
    assert "output" in message


def test_invalid_json_item_line(tmp_path: Path) -> None:
    (tmp_path / "items.jsonl").write_text('{"id": "a", "output": "x"}\n{"id": "b", oops}\n')
    batch = tmp_path / "batch.yaml"
    batch.write_text("judges: [openai/x]\ndimensions: [relevance]\nitems: items.jsonl\n")
    message = refused(batch)
    assert "line 2" in message
    assert "not valid JSON" in message


def test_items_file_with_no_items() -> None:
    message = refused(BAD / "no_items.yaml")
    assert "no_items.jsonl" in message
    assert "no items" in message


def test_empty_inline_items(tmp_path: Path) -> None:
    path = tmp_path / "batch.yaml"
    path.write_text("judges: [openai/x]\ndimensions: [relevance]\nitems: []\n")
    message = refused(path)
    assert "batch.yaml" in message
    assert "items" in message


def test_every_bad_line_is_reported(tmp_path: Path) -> None:
    (tmp_path / "items.jsonl").write_text(
        '{"id": "a"}\n{"id": "b", "output": "ok"}\n{"output": "no id"}\nnot json\n'
    )
    batch = tmp_path / "batch.yaml"
    batch.write_text("judges: [openai/x]\ndimensions: [relevance]\nitems: items.jsonl\n")
    with pytest.raises(BatchFileError) as info:
        load_batch(batch)
    assert [p.split(":")[0] for p in info.value.problems] == ["line 1", "line 3", "line 4"]
