"""What trusting the panel adds to the inputs: people's labels on items, a calibration file
named by a batch, the robust across-model choices; each bad one refused with one clear
paragraph at validation, before anything is enqueued."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from jury.batchfile.loading import load_batch
from jury.schemas.batch import Aggregation, Dimension, Item, Judge
from jury.schemas.calibration import Calibration
from jury.schemas.results import SampleResult
from jury.worker.judging.aggregation import aggregate_across_models, build_verdict
from jury.worker.judging.result_cache import cache_key
from tests.unit.batchfile.test_loading import refused

CALIBRATION = {
    "dimensions": {
        "relevance": {
            "low": 1,
            "high": 5,
            "judges": {"openai/lenient": {"method": "platt", "a": 1.2, "b": -4.0}},
        }
    }
}


def write(folder: Path, items: list[dict[str, Any]], **extra: Any) -> Path:
    spec = {
        "judges": ["openai/lenient", "openai/strict"],
        "dimensions": [
            "relevance",
            {"name": "tone", "description": "Kind?", "scale": {"min": 0, "max": 10}},
        ],
        "items": items,
        **extra,
    }
    path = folder / "batch.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_labels_load_and_mark_the_batch(tmp_path: Path) -> None:
    items: list[dict[str, Any]] = [
        {"id": "a", "output": "x", "labels": {"relevance": 4, "tone": 7.5}},
        {"id": "b", "output": "y"},
    ]
    source = load_batch(write(tmp_path, items))
    assert source.config.has_labels and source.stats.labelled == 1
    first = next(source.items())
    assert first.labels == {"relevance": 4, "tone": 7.5} and first.label_for("tone") == 7.5
    unlabelled = load_batch(write(tmp_path, [{"id": "b", "output": "y"}]))
    assert not unlabelled.config.has_labels


@pytest.mark.parametrize(
    ("item", "says"),
    [
        ({"labels": {"relevanse": 4}}, "labels name 'relevanse', which is not a dimension"),
        ({"labels": {"relevance": 6}}, "label 6 for 'relevance' lies outside the scale 1..5"),
        ({"labels": {"tone": -1}}, "outside the scale 0..10"),
        ({"labels": {"relevance": True}}, "must be a number"),
        ({"labels": {"relevance": "A"}}, "only a pairwise item has a preferred side"),
        ({"label": "A"}, "only a pairwise item has a preferred side"),
        ({"labels": {"relevance": "four"}}, "labels.relevance"),
    ],
)
def test_bad_labels_are_refused_with_where_they_are(
    tmp_path: Path, item: dict[str, Any], says: str
) -> None:
    message = refused(write(tmp_path, [{"id": "q1", "output": "x", **item}]))
    assert says in message and "nothing was enqueued" in message


def test_a_jsonl_label_problem_names_its_line(tmp_path: Path) -> None:
    lines = [{"id": "a", "output": "x"}, {"id": "b", "output": "y", "labels": {"depth": 3}}]
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    message = refused(write(tmp_path, "items.jsonl"))  # type: ignore[arg-type]
    assert "line 2: item 'b': labels name 'depth'" in message


def test_pairwise_items_take_a_side() -> None:
    pair = {"id": "p", "output_a": "x", "output_b": "y"}
    assert Item.model_validate({**pair, "label": "tie"}, context={"pairwise": True}).label == "tie"
    sides = Item.model_validate({**pair, "labels": {"tone": "B"}}, context={"pairwise": True})
    assert sides.label_for("tone") == "B" and sides.label_for("other") is None
    with pytest.raises(ValidationError, match="preferred: A, B or tie"):
        Item.model_validate({**pair, "labels": {"tone": 4}}, context={"pairwise": True})
    with pytest.raises(ValidationError):
        Item.model_validate({**pair, "label": "C"}, context={"pairwise": True})


def test_labels_never_change_the_result_cache_key() -> None:
    judge, messages = Judge(model="openai/x"), [[{"role": "user", "content": "m"}]]
    plain = cache_key(judge, Item(id="a", output="o"), messages, 0)
    labelled = cache_key(judge, Item(id="a", output="o", labels={"relevance": 2}), messages, 0)
    assert plain == labelled
    sided = Item(id="a", output_a="o", output_b="p", label="A")
    assert cache_key(judge, sided, messages, 0) == cache_key(
        judge, Item(id="a", output_a="o", output_b="p"), messages, 0
    )


def test_a_calibration_file_is_read_into_the_config(tmp_path: Path) -> None:
    (tmp_path / "calib.json").write_text(json.dumps(CALIBRATION))
    items = [{"id": "a", "output": "x"}]
    config = load_batch(write(tmp_path, items, calibration="calib.json")).config
    calibration = config.resolved_calibration
    assert isinstance(calibration, Calibration)
    assert calibration.dimensions["relevance"].judges["openai/lenient"].a == 1.2
    # stored as JSON and read back by a worker: the same calibration
    stored = type(config).model_validate(json.loads(config.model_dump_json()))
    assert stored.resolved_calibration == calibration


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "calib.json does not exist"),
        ("{not json", "cannot read"),
        (json.dumps({"dimensions": {"relevance": {"low": 1}}}), "is not a jury calibration file"),
        (
            json.dumps(
                {
                    "dimensions": {
                        "relevance": {**CALIBRATION["dimensions"]["relevance"], "high": 10}
                    }
                }
            ),
            "fitted to 'relevance' on the scale 1..10, this batch scores it on 1..5",
        ),
        (
            json.dumps({"dimensions": {"depth": CALIBRATION["dimensions"]["relevance"]}}),
            "none of them is on this batch's panel",
        ),
    ],
)
def test_a_bad_calibration_file_is_refused(tmp_path: Path, content: str | None, says: str) -> None:
    if content is not None:
        (tmp_path / "calib.json").write_text(content)
    message = refused(write(tmp_path, [{"id": "a", "output": "x"}], calibration="calib.json"))
    assert says in message


def test_a_pairwise_batch_is_not_calibrated(tmp_path: Path) -> None:
    (tmp_path / "calib.json").write_text(json.dumps(CALIBRATION))
    pair = {"id": "p", "output_a": "x", "output_b": "y"}
    message = refused(write(tmp_path, [pair], calibration="calib.json", pairwise=True))
    assert "a pairwise batch's labels are preferred sides" in message


def test_robust_choices_are_named_and_others_refused() -> None:
    assert Aggregation(across_models="trimmed_mean").across_models == "trimmed_mean"
    assert Aggregation(across_models="geometric_median").across_models == "geometric_median"
    with pytest.raises(ValidationError, match="geometric_median"):
        Aggregation(across_models="geometric_mean")
    scores = {"a": 3.0, "b": 3.5, "c": 2.5, "max": 5.0}
    assert aggregate_across_models(scores, {}, "trimmed_mean") == 3.25
    assert aggregate_across_models(scores, {}, "geometric_median") == 3.25
    assert aggregate_across_models(scores, {}, "mean") == 3.5
    # weights count in the geometric median: a judge holding over half the weight is it
    assert aggregate_across_models(scores, {"c": 4.0}, "geometric_median") == 2.5


@pytest.mark.parametrize("method", ["trimmed_mean", "geometric_median"])
def test_a_judge_without_a_score_is_left_out_not_counted_as_zero(method: str) -> None:
    panel = [Judge(model=f"openai/{name}", n=1) for name in ("a", "b", "c", "broken")]
    samples = [
        SampleResult(judge="openai/a", sample=0, score=4),
        SampleResult(judge="openai/b", sample=0, score=4),
        SampleResult(judge="openai/c", sample=0, score=5),
        SampleResult(judge="openai/broken", sample=0, error="503", error_kind="server_error"),
    ]
    aggregation = Aggregation(across_models=method)
    verdict = build_verdict("i", Dimension(name="relevance"), panel, samples, aggregation)
    assert verdict.consensus_metrics.final_score == 4
    assert verdict.consensus_metrics.flag_for_review
    assert any("broken produced no score" in reason for reason in verdict.flag_reasons)
