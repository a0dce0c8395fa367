"""Submit-time overrides and sampling: pure functions over a parsed batch document."""

from __future__ import annotations

from typing import Any

import pytest

from jury.batchfile.overrides import (
    SubmitOptions,
    apply_overrides,
    parse_override,
    sample_indices,
)
from jury.errors import JuryError


def _doc() -> dict[str, Any]:
    return {
        "judges": [{"model": "openai/a", "n": 3}, "openai/b"],
        "dimensions": ["relevance"],
        "aggregation": {"across_models": "mean"},
    }


def test_values_are_yaml_scalars() -> None:
    assert parse_override("judges.0.n=5").value == 5
    assert parse_override("judges.0.n=5").path == ("judges", "0", "n")
    assert parse_override("cache=false").value is False
    assert parse_override("aggregation.consensus_threshold=1.25").value == 1.25
    assert parse_override("name=my batch").value == "my batch"
    assert parse_override("judges.0.api_base=${URL:-http://x/v1}").value == "${URL:-http://x/v1}"
    assert parse_override("max_cost_usd=").value is None
    assert parse_override("a.b=x=y").value == "x=y"


@pytest.mark.parametrize("text", ["judges.0.n", "=5", "judges..n=5", ".n=1"])
def test_malformed_overrides_are_refused(text: str) -> None:
    with pytest.raises(JuryError, match="PATH=VALUE"):
        parse_override(text)


def test_overrides_set_nested_values_and_create_mappings() -> None:
    doc = _doc()
    sets = ["judges.0.n=5", "aggregation.across_models=median", "pairwise.orders=single"]
    apply_overrides(doc, [parse_override(t) for t in sets])
    assert doc["judges"][0] == {"model": "openai/a", "n": 5}
    assert doc["aggregation"] == {"across_models": "median"}
    assert doc["pairwise"] == {"orders": "single"}


def test_a_bare_model_judge_becomes_a_mapping() -> None:
    doc = _doc()
    apply_overrides(doc, [parse_override("judges.1.n=2")])
    assert doc["judges"][1] == {"model": "openai/b", "n": 2}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("judges.2.n=1", "holds 2 entries"),
        ("judges.x.n=1", "indexed by a number"),
        ("judges.0.n.deeper=1", "a value, not a mapping"),
    ],
)
def test_bad_paths_are_named(text: str, reason: str) -> None:
    with pytest.raises(JuryError, match=reason):
        apply_overrides(_doc(), [parse_override(text)])


def test_shorthands_set_every_judge() -> None:
    doc = _doc()
    SubmitOptions(temperature=0.0, concurrency=4).apply(doc)
    assert doc["judges"] == [
        {"model": "openai/a", "n": 3, "temperature": 0.0, "max_in_flight": 4},
        {"model": "openai/b", "temperature": 0.0, "max_in_flight": 4},
    ]
    doc = {"judges": ["openai/a"]}
    SubmitOptions(model="openai/gpt-4o", sets=("judges.0.n=1",)).apply(doc)
    assert doc["judges"] == [{"model": "openai/gpt-4o", "n": 1}]


def test_samples_are_reproducible_and_in_file_order() -> None:
    first = sample_indices(80, 32, seed=42)
    assert first == sample_indices(80, 32, seed=42)
    assert first != sample_indices(80, 32, seed=43)
    assert first == sorted(set(first)) and len(first) == 32 and first[-1] < 80
    assert sample_indices(5, 32, seed=42) == [0, 1, 2, 3, 4]
