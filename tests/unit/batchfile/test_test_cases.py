"""The multi-LLM judge plan's test cases read as items: a JSON list or JSON Lines of them, or
inline; test_id → id, profile → input, response → output, llm_criteria's fields → the item's,
everything else → metadata."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from jury.batchfile.loading import load_batch
from jury.errors import BatchFileError

# The plan's "Test Case JSON Schema (Updated)", with the prompt inputs of its prompt builder.
PLAN_CASE: dict[str, Any] = {
    "test_id": "08_new_test",
    "name": "New Test Name",
    "description": "What it checks",
    "evaluation_method": "deterministic_llm",
    "llm_criteria": {
        "enabled": True,
        "focus_areas": ["relevance", "category_alignment", "custom_criterion"],
        "prompt_hint": "Specific guidance for this test...",
        "custom_criteria": {
            "custom_criterion": {"name": "CUSTOM (1-5)", "description": "Evaluate custom aspect..."}
        },
    },
    "pass_criteria": [{"min": 3}],
    "setup": {"profile": "09_new_profile"},
    "profile": {"interests": ["history", "science"]},
    "response": {"episodes": [{"title": "Rome in a day"}]},
}
PLAIN_CASE = {"test_id": 9, "response": "Just text.", "llm_criteria": {"prompt_hint": "Be fair."}}


def write(tmp_path: Path, items: Any, **batch: Any) -> Path:
    if isinstance(items, str):
        batch.setdefault("items", items)
    else:
        batch["items"] = items
    path = tmp_path / "batch.yaml"
    path.write_text(
        yaml.safe_dump({"judges": ["openai/gpt-4o-mini"], "dimensions": ["relevance"], **batch})
    )
    return path


@pytest.mark.parametrize("shape", ["json", "jsonl", "inline"])
def test_plan_test_cases_become_items(tmp_path: Path, shape: str) -> None:
    cases = [PLAN_CASE, PLAIN_CASE]
    if shape == "json":
        (tmp_path / "test_cases.json").write_text(json.dumps(cases, indent=2))
        path = write(tmp_path, "test_cases.json")
    elif shape == "jsonl":
        (tmp_path / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
        path = write(tmp_path, "cases.jsonl")
    else:
        path = write(tmp_path, cases)
    source = load_batch(path)
    new, plain = list(source.items())
    assert (new.id, plain.id) == ("08_new_test", "9")
    assert json.loads(new.input or "") == PLAN_CASE["profile"]
    assert json.loads(new.output or "") == PLAN_CASE["response"]
    assert new.context == "New Test Name: What it checks"  # the plan's test_description
    assert new.focus_areas == ["relevance", "category_alignment", "custom_criterion"]
    assert new.prompt_hint == "Specific guidance for this test..."
    assert new.custom_criteria["custom_criterion"].rubric == (
        "CUSTOM (1-5): Evaluate custom aspect..."
    )
    assert new.metadata == {
        "name": "New Test Name",
        "description": "What it checks",
        "evaluation_method": "deterministic_llm",
        "pass_criteria": [{"min": 3}],
        "setup": {"profile": "09_new_profile"},
    }
    assert (plain.output, plain.input, plain.prompt_hint, plain.focus_areas) == (
        "Just text.",
        None,
        "Be fair.",
        [],
    )
    config = source.config
    assert [(d.name, d.item_only) for d in config.dimensions] == [
        ("relevance", False),
        ("category_alignment", True),
        ("custom_criterion", True),
    ]
    assert source.stats.cells == 3 + 1


def test_a_field_mapping_names_the_output_of_a_test_case(tmp_path: Path) -> None:
    case = {"test_id": "t", "answer": "Mapped.", "response": "not this", "llm_criteria": {}}
    (tmp_path / "cases.jsonl").write_text(json.dumps(case) + "\n")
    source = load_batch(write(tmp_path, {"path": "cases.jsonl", "fields": {"output": "answer"}}))
    (item,) = source.items()
    assert item.output == "Mapped."
    assert item.metadata == {}  # the mapped key is the output, not metadata


@pytest.mark.parametrize(
    ("case", "problem"),
    [
        (
            {"test_id": "off", "response": "x", "llm_criteria": {"enabled": False}},
            "test case 'off': llm_criteria.enabled is false, so the test case asks for no LLM",
        ),
        (
            {"test_id": "typo", "response": "x", "llm_criteria": {"focus_area": ["relevance"]}},
            "test case 'typo': llm_criteria has unknown keys ['focus_area']",
        ),
        (
            {"test_id": "bare", "llm_criteria": {}},
            "test case 'bare': no output to judge",
        ),
        (
            {"test_id": "bad", "response": "x", "llm_criteria": {"focus_areas": ["vibes"]}},
            "item 'bad': focus_areas names 'vibes', which is neither",
        ),
    ],
)
def test_bad_test_cases_are_named(tmp_path: Path, case: dict[str, Any], problem: str) -> None:
    (tmp_path / "cases.jsonl").write_text(json.dumps(case) + "\n")
    with pytest.raises(BatchFileError) as refused:
        load_batch(write(tmp_path, "cases.jsonl"))
    message = " ".join(str(refused.value).split())
    assert "cases.jsonl" in message and f"line 1: {problem}" in message


def test_labels_may_name_the_criteria_a_test_case_brings(tmp_path: Path) -> None:
    case = {**PLAN_CASE, "labels": {"custom_criterion": 4, "category_alignment": 2}}
    source = load_batch(write(tmp_path, [case]))
    assert source.config.has_labels
    (item,) = source.items()
    assert item.labels == {"custom_criterion": 4, "category_alignment": 2}
    with pytest.raises(BatchFileError, match="labels name 'tone', which is not a dimension"):
        load_batch(write(tmp_path, [{**PLAN_CASE, "labels": {"tone": 3}}]))
