"""One rule for identifiers (item ids, criterion, judge and batch names, --batch-id): printable,
NFC, no invisible or direction-changing characters; and every number of a batch finite."""

from __future__ import annotations

import unicodedata

import pytest
from pydantic import ValidationError

from jury.schemas.batch import BatchConfig, Item
from jury.schemas.identifiers import (
    batch_id_problem,
    html_text,
    identifier_problem,
    shown_escaped,
)

PANEL = {"judges": ["openai/x"], "dimensions": ["relevance"]}


@pytest.mark.parametrize(
    "text",
    [
        "q1",
        "Frage-7 (Kundendienst)",
        "réponse",  # composed é
        "[bold]markup[/] is data",
        "日本語の質問",
        "a/b/../c",  # an item id is data, never a path
    ],
)
def test_printable_normalised_ids_are_identifiers(text: str) -> None:
    assert identifier_problem(text, "item id") is None
    assert Item(id=text, output="x").id == text


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("q\u200b1", "\\u200b"),  # zero-width space: looks like q1
        ("abc\u202eevil", "\\u202e"),  # right-to-left override
        ("id\u2066x\u2069", "\\u2066"),  # isolate
        ("tab\tid", "\\x09"),
        ("esc\x1b[2Jid", "\\x1b"),
        ("line\nbreak", "\\x0a"),
        ("nb\xa0space", "\\xa0"),
        ("filler\u3164", "\\u3164"),  # Hangul filler: printable but blank
        ("bom\ufeff", "\\ufeff"),
    ],
)
def test_hidden_characters_are_refused_and_shown_escaped(text: str, shown: str) -> None:
    problem = identifier_problem(text, "item id")
    assert problem is not None and shown in problem
    with pytest.raises(ValidationError, match="invisible, control or direction-changing"):
        Item(id=text, output="x")


def test_decomposed_and_padded_ids_are_refused() -> None:
    decomposed = unicodedata.normalize("NFD", "réponse")
    assert "NFC" in (identifier_problem(decomposed, "item id") or "")
    assert "space" in (identifier_problem(" q1", "item id") or "")
    assert "empty" in (identifier_problem("", "item id") or "")


def test_criterion_names_never_read_as_paths() -> None:
    for bad in ("../etc", "a/b", "x y", ".hidden", "tone\u200b"):
        with pytest.raises(ValidationError):
            BatchConfig.model_validate({**PANEL, "dimensions": [{"name": bad, "description": "d"}]})
    config = BatchConfig.model_validate(
        {**PANEL, "dimensions": [{"name": "tonalité-1.2", "description": "d"}]}
    )
    assert config.dimensions[0].name == "tonalité-1.2"


def test_batch_and_judge_names() -> None:
    with pytest.raises(ValidationError, match="batch name"):
        BatchConfig.model_validate({**PANEL, "name": "demo\x1b]0;owned\x07"})
    with pytest.raises(ValidationError, match="judge name"):
        BatchConfig.model_validate({**PANEL, "judges": [{"model": "openai/x", "name": "a\n"}]})
    assert BatchConfig.model_validate({**PANEL, "name": "Support ✓ 2024"}).name == "Support ✓ 2024"


@pytest.mark.parametrize("batch_id", ["20250101-120000-abc123", "run.1", "A_b-c"])
def test_good_batch_ids(batch_id: str) -> None:
    assert batch_id_problem(batch_id) is None


@pytest.mark.parametrize(
    "batch_id", ['a"b', "a/b", "../x", "-rf", "x" * 101, "a b", "id\n", "é", "a'b", ""]
)
def test_batch_ids_with_quotes_slashes_or_more_are_refused(batch_id: str) -> None:
    assert batch_id_problem(batch_id) is not None


def test_shown_escaped_keeps_ordinary_text() -> None:
    assert shown_escaped("plain [text] é 日本") == "plain [text] é 日本"
    assert shown_escaped("a\x1b[2Jb\U000e0041") == "a\\x1b[2Jb\\U000e0041"


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        (
            {"dimensions": [{"name": "t", "description": "d", "scale": {"min": 1, "max": 1e308}}]},
            "max",
        ),
        (
            {"dimensions": [{"name": "t", "description": "d", "scale": {"min": -1e308, "max": 5}}]},
            "min",
        ),
        (
            {"dimensions": [{"name": "t", "description": "d", "threshold": float("nan")}]},
            "threshold",
        ),
        ({"judges": [{"model": "openai/x", "weight": float("inf")}]}, "weight"),
        ({"judges": [{"model": "openai/x", "weight": 1e300}]}, "weight"),
        ({"judges": [{"model": "openai/x", "input_cost_per_token": 1e9}]}, "input_cost_per_token"),
        ({"aggregation": {"consensus_threshold": float("inf")}}, "consensus_threshold"),
        ({"max_cost_usd": float("inf")}, "max_cost_usd"),
        ({"pairwise": {"tie_tolerance": float("nan")}}, "tie_tolerance"),
        ({"adaptive": {"max_std": float("inf")}}, "max_std"),
    ],
)
def test_numbers_must_be_finite_and_of_usual_size(patch: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        BatchConfig.model_validate({**PANEL, **patch})
    assert field in str(info.value)


def test_item_metadata_must_be_finite() -> None:
    with pytest.raises(ValidationError, match=r"metadata\.a\[1\] is not a finite number"):
        Item(id="q", output="x", metadata={"a": [1, float("nan")]})


def test_html_text_escapes_markup_and_shows_hidden_characters() -> None:
    shown = html_text("<script>alert('x')</script>\x1b[2J\u202eevil\r\nnext \"line\"")
    assert "<" not in shown and "\x1b" not in shown and "\u202e" not in shown
    assert "&lt;script&gt;" in shown and "\\x1b[2J" in shown and "\\u202eevil" in shown
    assert shown.endswith("\nnext &quot;line&quot;")  # a line break stays one; quotes escaped
    assert html_text(None) == ""
