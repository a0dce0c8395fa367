"""The multi-LLM judge plan's judge_config.json, as a file of its own named by a batch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from jury.batchfile.loading import load_batch
from jury.batchfile.overrides import SubmitOptions
from jury.errors import BatchFileError

# The plan's JUDGE_CONFIG, as written (Phase 6.2).
JUDGE_CONFIG = {
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
}


def _batch(folder: Path, **extra: object) -> Path:
    (folder / "judge_config.json").write_text(json.dumps(JUDGE_CONFIG))
    spec = {
        "name": "plan",
        "judges": "judge_config.json",
        "dimensions": ["relevance", "hypothesis_alignment"],
        "items": [{"id": "t1", "output": "Three papers on protein folding."}],
        **extra,
    }
    path = folder / "batch.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_the_plan_config_loads_as_is(tmp_path: Path) -> None:
    config = load_batch(_batch(tmp_path)).config
    assert [(j.model, j.enabled, j.n, j.temperature) for j in config.judges] == [
        ("openai/gpt-4o-mini", True, 3, 0.8),
        ("gemini/gemini-2.0-flash", True, 3, 0.8),
        ("anthropic/claude-3-5-sonnet-20241022", False, 3, 0.8),
    ]
    assert config.samples_per_cell == 6  # two enabled judges × 3 samples
    aggregation = config.aggregation
    assert (aggregation.within_model, aggregation.across_models) == ("mean", "mean")
    assert aggregation.consensus_threshold == 1.5 and aggregation.flag_low_consensus
    assert aggregation.report_uncertainty


def test_the_batch_file_wins_and_overrides_reach_into_the_config(tmp_path: Path) -> None:
    path = _batch(tmp_path, aggregation={"across_models": "median", "consensus_threshold": 1.0})
    options = SubmitOptions(sets=("judges.2.enabled=false", "judges.0.n=5"))
    config = load_batch(path, adjust=options.apply).config
    assert config.aggregation.across_models == "median"
    assert config.aggregation.within_model == "mean"
    assert config.aggregation.consensus_threshold == 1.0
    assert [j.n for j in config.judges] == [5, 3, 3]
    (tmp_path / "other.yaml").write_text("- {model: openai/gpt-4o, n: 1}\n")
    other = load_batch(path, adjust=SubmitOptions(sets=("judges=other.yaml",)).apply).config
    assert [(j.model, j.n) for j in other.judges] == [("openai/gpt-4o", 1)]


def test_a_missing_or_malformed_config_is_named(tmp_path: Path) -> None:
    path = _batch(tmp_path)
    (tmp_path / "judge_config.json").unlink()
    with pytest.raises(BatchFileError, match=r"judge config .*judge_config\.json does not exist"):
        load_batch(path)
    (tmp_path / "judge_config.json").write_text(json.dumps({"temperature": 0.8}))
    with pytest.raises(BatchFileError, match="must hold a list of judges"):
        load_batch(path)
    (tmp_path / "judge_config.json").write_text("{not json")
    with pytest.raises(BatchFileError, match="judges: "):
        load_batch(path)


def test_the_plan_report_record(tmp_path: Path) -> None:
    """Phase 6.4's record, rebuilt from its samples by the batch the plan's config loads."""
    from jury.schemas.results import SampleResult
    from jury.worker.judging.aggregation import build_verdict

    path = _batch(
        tmp_path,
        dimensions=[
            {"name": "hypothesis_alignment", "scale": {"min": 1, "max": 10}, "threshold": 6.0}
        ],
    )
    config = load_batch(path).config
    samples = [
        SampleResult(judge=judge, sample=i, score=score)
        for judge, scores in (
            ("openai/gpt-4o-mini", [6.0, 7.0, 6.5]),
            ("gemini/gemini-2.0-flash", [5.0, 6.0, 5.5]),
        )
        for i, score in enumerate(scores)
    ]
    record = build_verdict(
        "t1", config.dimensions[0], config.panel, samples, config.aggregation
    ).model_dump(mode="json")
    evaluations = record["llm_evaluations"]
    assert evaluations["openai/gpt-4o-mini"]["aggregated_score"] == 6.5
    assert evaluations["gemini/gemini-2.0-flash"]["aggregated_score"] == 5.5
    # The plan shows 0.41, numpy's population std; jury reports the sample std (ddof=1).
    assert evaluations["openai/gpt-4o-mini"]["within_model_std"] == pytest.approx(0.5)
    metrics = record["consensus_metrics"]
    assert metrics["final_score"] == 6.0
    assert metrics["cross_model_std"] == pytest.approx(0.71, abs=0.005)
    assert (metrics["consensus_level"], metrics["confidence"]) == ("PARTIAL", "MEDIUM")
    assert metrics["flag_for_review"] is False
    assert (record["passed"], record["threshold"]) == (True, 6.0)
