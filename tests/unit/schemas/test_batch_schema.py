"""schemas.batch: the batch spec is validated up front, and the original plan's shape loads."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from jury.schemas.batch import (
    DEFAULT_TEMPERATURE,
    PROVIDER_DEFAULT_MODELS,
    Aggregation,
    BatchConfig,
    Dimension,
    Item,
    Judge,
    Scale,
)
from jury.schemas.criteria import BUILTIN_CRITERIA, builtin_criterion

REQUIRED_BUILTINS = [
    "relevance",
    "diversity",
    "quality",
    "hypothesis_alignment",
    "category_alignment",
    "cross_disciplinary_coherence",
    "personalization_strength",
    "topic_breadth",
    "helpfulness",
    "accuracy",
    "depth",
    "creativity",
    "level_of_detail",
]

PLAN_CONFIG: dict[str, Any] = {
    "judges": [
        {"provider": "openai", "enabled": True, "n": 3},
        {"provider": "gemini", "enabled": True, "n": 3},
        {"provider": "anthropic", "enabled": False, "n": 3},
    ],
    "temperature": 0.8,
    "aggregation": {"within_model": "mean", "across_models": "mean"},
    "report_uncertainty": True,
    "flag_low_consensus": True,
    "consensus_threshold": 1.5,
    "dimensions": ["relevance", "diversity"],
}


def config(**overrides: Any) -> dict[str, Any]:
    return {"judges": ["openai/gpt-4o-mini"], "dimensions": ["relevance"], **overrides}


def error_text(data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as info:
        BatchConfig.model_validate(data)
    return str(info.value)


# --- criteria and dimensions ----------------------------------------------------------------


@pytest.mark.parametrize("name", REQUIRED_BUILTINS)
def test_builtin_criteria_are_registered(name: str) -> None:
    criterion = builtin_criterion(name)
    assert criterion is not None
    assert criterion.id == name
    assert len(criterion.description) > 20
    assert criterion.scale_min < criterion.scale_max
    assert criterion.scale_min <= criterion.threshold <= criterion.scale_max


def test_registry_keys_match_ids() -> None:
    assert all(key == criterion.id for key, criterion in BUILTIN_CRITERIA.items())
    assert builtin_criterion("no_such_criterion") is None


@pytest.mark.parametrize("name", REQUIRED_BUILTINS)
def test_builtin_dimension_by_name_is_filled_in(name: str) -> None:
    builtin = builtin_criterion(name)
    assert builtin is not None
    dimension = Dimension.model_validate(name)
    assert dimension.name == name
    assert dimension.description == builtin.description
    assert dimension.scale == Scale(min=builtin.scale_min, max=builtin.scale_max)
    assert dimension.threshold == builtin.threshold


def test_builtin_fields_can_be_overridden() -> None:
    dimension = Dimension(name="relevance", description="Mine.", threshold=4.0)
    assert dimension.description == "Mine."
    assert dimension.threshold == 4.0
    assert dimension.resolved_scale == Scale(min=1, max=5)


def test_custom_dimension_needs_a_description() -> None:
    with pytest.raises(ValidationError, match="needs a description"):
        Dimension.model_validate("sparkle")
    with pytest.raises(ValidationError, match="needs a description"):
        Dimension(name="tone")


def test_custom_dimension_defaults() -> None:
    dimension = Dimension(name="tone", description="Is the tone kind?")
    assert dimension.resolved_scale == Scale(min=1, max=5)
    assert dimension.resolved_threshold == 3.0  # the middle of the scale


def test_the_default_thresholds_are_the_ones_the_batch_file_page_tells() -> None:
    from tests.conftest import ROOT

    page = (ROOT / "docs" / "batch-file.md").read_text()
    table = page.split("**Default thresholds.**", 1)[1].split("\n\n", 2)[1]
    ten = Scale(min=1, max=10)
    custom = {"name": "tone", "description": "Kind?"}
    told = {
        "built-in (`relevance`, …) | 1–5 | 3.5": Dimension(name="relevance").threshold == 3.5,
        "(6.625 on 1–10)": Dimension(name="relevance", scale=ten).threshold == 6.625,
        "the middle of its scale**: 3 on 1–5": Dimension(**custom).threshold == 3.0,
        "5.5 on 1–10": Dimension(**custom, scale=ten).threshold == 5.5,
    }
    assert {text: text in table and holds for text, holds in told.items()} == dict.fromkeys(
        told, True
    )


def test_custom_dimension_with_its_own_scale() -> None:
    dimension = Dimension(
        name="tone", description="Kind?", scale=Scale(min=-2, max=2), threshold=0.5
    )
    assert dimension.resolved_scale.min == -2
    assert dimension.resolved_threshold == 0.5


@pytest.mark.parametrize(("low", "high"), [(5, 5), (5, 1), (0.5, 0.25)])
def test_scale_min_must_be_below_max(low: float, high: float) -> None:
    with pytest.raises(ValidationError, match="must be below max"):
        Scale(min=low, max=high)


def test_scale_contains_is_inclusive() -> None:
    scale = Scale(min=1, max=5)
    assert scale.contains(1) and scale.contains(5) and scale.contains(3.3)
    assert not scale.contains(0.99) and not scale.contains(5.01)


@pytest.mark.parametrize("threshold", [0, 5.5, -1])
def test_threshold_outside_scale_is_rejected(threshold: float) -> None:
    with pytest.raises(ValidationError, match="outside its scale"):
        Dimension(name="tone", description="Kind?", threshold=threshold)


def test_threshold_on_the_scale_edge_is_accepted() -> None:
    assert Dimension(name="tone", description="Kind?", threshold=5).threshold == 5


def test_unknown_dimension_field_is_rejected() -> None:
    with pytest.raises(ValidationError, match="threshhold"):
        Dimension.model_validate({"name": "relevance", "threshhold": 3})


def test_dimension_name_characters() -> None:
    with pytest.raises(ValidationError):
        Dimension(name="tone of voice", description="Kind?")


def test_duplicate_dimensions_are_rejected() -> None:
    assert "appear twice" in error_text(config(dimensions=["relevance", "relevance"]))


# --- judges ---------------------------------------------------------------------------------


def test_judge_defaults() -> None:
    judge = Judge.model_validate("openai/gpt-4o-mini")
    assert judge.model == "openai/gpt-4o-mini"
    assert judge.name == "openai/gpt-4o-mini"
    assert judge.n == 3
    assert judge.temperature == DEFAULT_TEMPERATURE == 0.8
    assert judge.weight == 1.0
    assert judge.enabled is True


def test_unknown_judge_field_is_rejected() -> None:
    text = error_text(config(judges=[{"model": "openai/gpt-4o-mini", "temprature": 0.2}]))
    assert "temprature" in text


def test_unknown_top_level_field_is_rejected() -> None:
    assert "judge_count" in error_text(config(judge_count=3))


@pytest.mark.parametrize("n", [0, -1])
def test_n_below_one_is_rejected(n: int) -> None:
    assert "judges.0.n" in error_text(config(judges=[{"model": "openai/x", "n": n}]))


@pytest.mark.parametrize(
    "bad",
    [{"weight": 0}, {"temperature": 2.5}, {"rpm": 0}, {"api_base": "127.0.0.1:8011"}],
)
def test_other_judge_limits(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        Judge.model_validate({"model": "openai/x", **bad})


def test_duplicate_judge_names_are_rejected() -> None:
    text = error_text(config(judges=["openai/gpt-4o-mini", "openai/gpt-4o-mini"]))
    assert "unique" in text


def test_same_model_twice_with_distinct_names_is_fine() -> None:
    judges = [
        {"model": "openai/gpt-4o-mini", "name": "mini-cold", "temperature": 0.0},
        {"model": "openai/gpt-4o-mini", "name": "mini-hot", "temperature": 1.2},
    ]
    batch = BatchConfig.model_validate(config(judges=judges))
    assert [j.name for j in batch.panel] == ["mini-cold", "mini-hot"]


def test_a_panel_without_enabled_judge_is_rejected() -> None:
    text = error_text(config(judges=[{"model": "openai/x", "enabled": False}]))
    assert "no enabled judge" in text


def test_empty_panel_is_rejected() -> None:
    assert "judges" in error_text(config(judges=[]))


def test_unknown_provider() -> None:
    text = error_text(config(judges=[{"provider": "mistralish", "n": 2}]))
    assert "unknown provider 'mistralish'" in text


def test_provider_with_explicit_model_keeps_the_model() -> None:
    judge = Judge.model_validate({"provider": "openai", "model": "openai/gpt-4o"})
    assert judge.model == "openai/gpt-4o"


@pytest.mark.parametrize("value", ["sk-abc123-xyz", "sk-proj-AAAA BBBB", "1abc"])
def test_api_key_env_holding_a_key_is_rejected(value: str) -> None:
    with pytest.raises(ValidationError) as info:
        Judge(model="openai/x", api_key_env=value)
    message = info.value.errors()[0]["msg"]
    assert "api_key_env must name an environment variable" in message
    assert value not in message


def test_api_key_env_naming_a_variable_is_accepted() -> None:
    assert Judge(model="openai/x", api_key_env="MY_KEY_2").api_key_env == "MY_KEY_2"


# --- the original plan's shape --------------------------------------------------------------


def test_plan_shape_loads_as_is() -> None:
    batch = BatchConfig.model_validate(PLAN_CONFIG)
    assert [j.model for j in batch.judges] == [
        PROVIDER_DEFAULT_MODELS["openai"],
        PROVIDER_DEFAULT_MODELS["gemini"],
        PROVIDER_DEFAULT_MODELS["anthropic"],
    ]
    assert [j.model for j in batch.panel] == [
        PROVIDER_DEFAULT_MODELS["openai"],
        PROVIDER_DEFAULT_MODELS["gemini"],
    ]
    assert all(j.n == 3 for j in batch.judges)
    assert batch.aggregation == Aggregation(
        within_model="mean",
        across_models="mean",
        consensus_threshold=1.5,
        flag_low_consensus=True,
        report_uncertainty=True,
    )
    assert batch.samples_per_cell == 6


def test_plan_shape_applies_temperature_and_moves_threshold() -> None:
    data = {
        **PLAN_CONFIG,
        "temperature": 0.3,
        "consensus_threshold": 0.9,
        "flag_low_consensus": False,
    }
    batch = BatchConfig.model_validate(data)
    assert [j.temperature for j in batch.judges] == [0.3, 0.3, 0.3]
    assert batch.aggregation.consensus_threshold == 0.9
    assert batch.aggregation.flag_low_consensus is False


def test_plan_temperature_does_not_override_a_judge_own() -> None:
    data = {**PLAN_CONFIG, "judges": [{"provider": "openai", "temperature": 0.1}, "x/y"]}
    batch = BatchConfig.model_validate({**data, "temperature": 0.3})
    assert batch.judges[0].temperature == 0.1


def test_plan_temperature_applies_to_judges_given_as_strings() -> None:
    batch = BatchConfig.model_validate(
        {"judges": ["openai/gpt-4o-mini"], "temperature": 0.2, "dimensions": ["relevance"]}
    )
    assert batch.judges[0].temperature == 0.2


def test_plan_shape_without_aggregation_block() -> None:
    data = {k: v for k, v in PLAN_CONFIG.items() if k != "aggregation"}
    batch = BatchConfig.model_validate({**data, "consensus_threshold": 1.1})
    assert batch.aggregation.consensus_threshold == 1.1
    assert batch.aggregation.within_model == "mean"


def test_panel_and_lookups() -> None:
    batch = BatchConfig.model_validate(PLAN_CONFIG)
    anthropic = PROVIDER_DEFAULT_MODELS["anthropic"]
    assert batch.judge(anthropic).enabled is False
    assert anthropic not in [j.name for j in batch.panel]
    assert batch.dimension("diversity").name == "diversity"
    with pytest.raises(KeyError):
        batch.judge("nobody")
    with pytest.raises(KeyError):
        batch.dimension("nothing")


# --- items ----------------------------------------------------------------------------------


def test_numeric_item_ids_become_strings() -> None:
    assert Item.model_validate({"id": 42, "output": "x"}).id == "42"
    assert Item.model_validate({"id": 0, "output": "x"}).id == "0"


def test_item_needs_id_and_output() -> None:
    with pytest.raises(ValidationError, match="output"):
        Item.model_validate({"id": "a"})
    with pytest.raises(ValidationError, match="id"):
        Item.model_validate({"output": "a"})
    with pytest.raises(ValidationError):
        Item.model_validate({"id": "", "output": "a"})


def test_item_rejects_boolean_id_and_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        Item.model_validate({"id": True, "output": "x"})
    with pytest.raises(ValidationError, match="ouput"):
        Item.model_validate({"id": "a", "output": "x", "ouput": "y"})


def test_item_optional_fields() -> None:
    item = Item.model_validate(
        {
            "id": "a",
            "output": "o",
            "input": "i",
            "reference": "r",
            "context": "c",
            "metadata": {"k": 1},
            "focus_areas": ["x"],
            "prompt_hint": "h",
        }
    )
    assert (item.input, item.reference, item.context, item.prompt_hint) == ("i", "r", "c", "h")
    assert item.metadata == {"k": 1}
    assert item.focus_areas == ["x"]
