"""The multi-LLM judge plan's test cases read as items (docs/coming-from.md).

A test case, as the plan writes one:

    {"test_id": "08_new_test", "name": "New Test Name", "description": "...",
     "evaluation_method": "deterministic_llm",
     "llm_criteria": {"enabled": true, "focus_areas": ["relevance", "custom_criterion"],
                      "prompt_hint": "...",
                      "custom_criteria": {"custom_criterion": {"name": "CUSTOM (1-5)",
                                                               "description": "..."}}},
     "pass_criteria": [...], "setup": {...}, "profile": {...}, "response": {...}}

becomes the item `test_id` → `id`; the plan's prompt inputs `profile` → `input` and
`response` → `output` (a structure as indented JSON text; `input`/`output` are taken as they
are); `name: description` (the plan's "Test Case Being Evaluated") → `context`, unless the
case has one; `llm_criteria`'s three fields → the item fields of the same names; every other
key (name, description, evaluation_method, pass_criteria, setup, …) → `metadata`, kept beside
the verdicts and never shown to a judge. A record is a test case when it has `test_id` or
`llm_criteria`; any other record is an item as it is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

TEST_CASE_KEYS = ("test_id", "llm_criteria")
LLM_CRITERIA_KEYS = ("enabled", "focus_areas", "prompt_hint", "custom_criteria")
# The plan's prompt inputs, by the item field each one becomes.
_PLAN_FIELDS = {"input": "profile", "output": "response"}
_ITEM_KEYS = ("id", "input", "output", "reference", "context", "labels", "label")


def is_test_case(fields: Mapping[str, Any]) -> bool:
    return any(key in fields for key in TEST_CASE_KEYS)


def _text(value: Any) -> Any:
    """A structure (the plan's profile, its response) as JSON text the judge reads."""
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, indent=2)
    return value


def test_case_fields(
    raw: Mapping[str, Any], columns: Mapping[str, str]
) -> tuple[dict[str, Any], str | None]:
    """(the item's fields, or why the test case cannot be one)."""
    name = raw.get("test_id", raw.get("id"))
    where = f"test case {name!r}" if name is not None else "test case"
    criteria = raw.get("llm_criteria") or {}
    if not isinstance(criteria, dict):
        return {}, f"{where}: llm_criteria must be a mapping"
    unknown = sorted(str(k) for k in criteria if k not in LLM_CRITERIA_KEYS)
    if unknown:
        return {}, (
            f"{where}: llm_criteria has unknown keys {unknown} "
            f"(known: {', '.join(LLM_CRITERIA_KEYS)})"
        )
    if criteria.get("enabled", True) is False:
        return {}, (
            f"{where}: llm_criteria.enabled is false, so the test case asks for no LLM "
            "judgment; leave it out of the batch's items (or set enabled: true)"
        )
    used = {"test_id", "llm_criteria", "metadata", *_ITEM_KEYS, *_PLAN_FIELDS.values()}
    item: dict[str, Any] = {"id": name}
    for field in ("input", "output"):
        value = raw.get(field, raw.get(_PLAN_FIELDS[field]))
        if value is not None:
            item[field] = _text(value)
    for field in ("reference", "context", "labels", "label"):
        if field in raw:
            item[field] = raw[field]
    if "context" not in item and (raw.get("name") or raw.get("description")):
        # The plan's "Test Case Being Evaluated": f"{name}: {description}".
        item["context"] = f"{raw.get('name', 'Unknown')}: {raw.get('description', '')}"
    for field in ("focus_areas", "prompt_hint", "custom_criteria"):
        if criteria.get(field) is not None:
            item[field] = criteria[field]
    metadata = raw.get("metadata")
    extra = {k: v for k, v in raw.items() if k not in used}
    item["metadata"] = {**extra, **metadata} if isinstance(metadata, dict) else extra
    for target, column in columns.items():
        if column in raw:
            item[target] = _text(raw[column]) if target in ("input", "output") else raw[column]
            item["metadata"].pop(column, None)
    if item.get("output") is None and not ("output_a" in item and "output_b" in item):
        return {}, (
            f"{where}: no output to judge; give the system's answer as `response` (the "
            "plan's name) or `output`, or map your key with items: {path: …, fields: "
            "{output: your_key}}"
        )
    return item, None
