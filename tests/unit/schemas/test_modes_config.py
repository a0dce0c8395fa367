"""The batch file's `mode` and `pairwise` settings: items validated by the batch's mode with
clear errors, the tasks a mode publishes, and the dry-run plan of each mode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from jury.batchfile.loading import load_batch
from jury.batchfile.planning import plan_batch
from jury.errors import BatchFileError
from jury.schemas.batch import BatchConfig, Item
from jury.schemas.calls import CallSpec, call_spec, task_refs
from jury.schemas.tasks import SampleRef

JUDGES = [{"model": "openai/gpt-4o-mini", "n": 3}, {"model": "openai/balanced", "n": 2}]
PAIR = {"id": "p1", "input": "Q?", "output_a": "first answer", "output_b": "second answer"}


def write(tmp_path: Path, items: list[dict[str, Any]] | str, **spec: Any) -> Path:
    document = {"judges": JUDGES, "dimensions": ["relevance", "accuracy"], **spec}
    if isinstance(items, str):
        document["items"] = items
    else:
        (tmp_path / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
        document["items"] = "items.jsonl"
    path = tmp_path / "batch.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def refused(path: Path) -> str:
    with pytest.raises(BatchFileError) as info:
        load_batch(path)
    return str(info.value)


def test_defaults_are_per_dimension_and_not_pairwise() -> None:
    config = BatchConfig.model_validate({"judges": JUDGES, "dimensions": ["relevance"]})
    assert config.mode == "per_dimension" and config.pairwise is None


def test_pairwise_batch_loads_pair_items(tmp_path: Path) -> None:
    source = load_batch(write(tmp_path, [PAIR], pairwise={"tie_tolerance": 0.25}))
    assert source.config.pairwise is not None
    assert source.config.pairwise.tie_tolerance == 0.25
    [item] = list(source.items())
    assert item.is_pair and item.output is None
    # Both outputs count towards the item's size.
    assert source.stats.text_chars == len("Q?first answersecond answer")


def test_pairwise_true_means_the_defaults(tmp_path: Path) -> None:
    source = load_batch(write(tmp_path, [PAIR], pairwise=True))
    assert source.config.pairwise is not None and source.config.pairwise.tie_tolerance == 0.5
    assert (
        load_batch(write(tmp_path, [{"id": "a", "output": "x"}], pairwise=False)).config.pairwise
        is None
    )


def test_pair_item_missing_an_output_is_refused_with_its_line(tmp_path: Path) -> None:
    items = [PAIR, {"id": "p2", "output_a": "only one"}]
    message = refused(write(tmp_path, items, pairwise={}))
    assert "items.jsonl" in message and "nothing was enqueued" in message
    assert "line 2: item.output_b: Field required (a pairwise batch compares" in message


def test_pair_item_with_a_single_output_is_refused(tmp_path: Path) -> None:
    inline = tmp_path / "inline.yaml"
    inline.write_text(
        yaml.safe_dump(
            {
                "judges": JUDGES,
                "dimensions": ["relevance"],
                "pairwise": {},
                "items": [{"id": "a", "output": "x", "output_a": "y", "output_b": "z"}],
            }
        )
    )
    message = refused(inline)
    assert "items[0].output: a pairwise item has output_a and output_b to compare" in message


def test_pair_outputs_in_an_ordinary_batch_are_refused(tmp_path: Path) -> None:
    message = refused(write(tmp_path, [PAIR]))
    assert "line 1: item.output_a: only a pairwise batch compares output_a with output_b" in message
    assert "add a `pairwise:` section" in message
    assert "item.output: Field required" in message


def test_a_stored_pair_item_reads_back_without_context() -> None:
    item = Item.model_validate(PAIR)
    assert item.is_pair
    with pytest.raises(ValidationError, match="Field required"):
        Item.model_validate({"id": "x", "output_a": "only one"})


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({"mode": "all_at_once"}, "mode: Input should be 'per_dimension' or 'combined'"),
        ({"pairwise": {"tie_tolerance": -1}}, "pairwise.tie_tolerance: Input should be greater"),
        ({"pairwise": {"tolerance": 1}}, "pairwise.tolerance: Extra inputs are not permitted"),
        (
            {"pairwise": {}, "aggregation": {"across_models": "majority_vote"}},
            "majority_vote votes pass/fail against a threshold",
        ),
    ],
)
def test_bad_mode_settings(tmp_path: Path, spec: dict[str, Any], problem: str) -> None:
    assert problem in refused(write(tmp_path, [PAIR], **spec))


def test_combined_mode_publishes_one_task_per_item_judge_and_sample() -> None:
    config = BatchConfig.model_validate(
        {"judges": JUDGES, "dimensions": ["relevance", "accuracy"], "mode": "combined"}
    )
    refs = [
        SampleRef("b", item, dimension, judge, sample)
        for item in ("i1", "i2")
        for dimension in ("relevance", "accuracy")
        for judge, sample in (("j1", 0), ("j1", 1), ("j2", 0))
    ]
    tasks = list(task_refs(config, refs))
    # A combined task is named by the first dimension its call scores; no magic dimension.
    assert tasks == [
        SampleRef("b", item, "relevance", judge, sample)
        for item in ("i1", "i2")
        for judge, sample in (("j1", 0), ("j1", 1), ("j2", 0))
    ]
    assert call_spec(config, "relevance") == CallSpec(("relevance", "accuracy"))
    per_dimension = config.model_copy(update={"mode": "per_dimension"})
    assert list(task_refs(per_dimension, refs)) == refs


def test_call_specs_are_values_of_the_batch() -> None:
    base = {"judges": JUDGES, "dimensions": ["relevance", "accuracy"]}
    plain = BatchConfig.model_validate(base)
    assert call_spec(plain, "accuracy") == CallSpec(("accuracy",))
    pairwise = BatchConfig.model_validate({**base, "pairwise": {}})
    assert call_spec(pairwise, "accuracy") == CallSpec(("accuracy",), ("AB", "BA"))
    once = BatchConfig.model_validate({**base, "pairwise": {"orders": "single"}})
    assert call_spec(once, "accuracy").orders == ("AB",) and call_spec(once, "x").calls == 1
    both = BatchConfig.model_validate({**base, "pairwise": {}, "mode": "combined"})
    assert call_spec(both, "relevance") == CallSpec(("relevance", "accuracy"), ("AB", "BA"))


def test_plan_counts_calls_per_mode() -> None:
    base = {"judges": JUDGES, "dimensions": ["relevance", "accuracy", "depth"]}
    per_dimension = plan_batch(BatchConfig.model_validate(base), 10, 20_000)
    combined = plan_batch(BatchConfig.model_validate({**base, "mode": "combined"}), 10, 20_000)
    pairwise = plan_batch(BatchConfig.model_validate({**base, "pairwise": {}}), 10, 20_000)
    both = plan_batch(
        BatchConfig.model_validate({**base, "mode": "combined", "pairwise": {}}), 10, 20_000
    )
    assert [j.calls for j in per_dimension.judges] == [10 * 3 * 3, 10 * 3 * 2]
    assert [j.calls for j in combined.judges] == [10 * 3, 10 * 2]
    assert [j.calls for j in pairwise.judges] == [10 * 3 * 3 * 2, 10 * 3 * 2 * 2]
    assert [j.calls for j in both.judges] == [10 * 3 * 2, 10 * 2 * 2]
    # The item is read once per call: combined reads it a third as often.
    first = per_dimension.judges[0].prompt_tokens, combined.judges[0].prompt_tokens
    assert first[1] < first[0] / 2
    # Each combined answer holds every dimension's score: the same completion tokens.
    assert combined.judges[0].completion_tokens == per_dimension.judges[0].completion_tokens
