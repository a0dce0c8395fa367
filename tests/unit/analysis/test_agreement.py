"""schemas.agreement: alpha against Krippendorff's worked example and the `krippendorff`
package, Spearman, bias and the within-model variance share against hand-computed values, the
undefined cases, and the summary that `jury results` prints (table and JSON)."""

from __future__ import annotations

import io
import json
import math
import random
from datetime import UTC, datetime

import krippendorff
import numpy as np
import pytest
from rich.console import Console

from jury.analysis.agreement import (
    AgreementAccumulator,
    AlphaLevel,
    batch_agreement,
    krippendorff_alpha,
    spearman,
)
from jury.results.formats import Summary, print_summary, write_json
from jury.schemas.results import ConsensusMetrics, JudgeEvaluation, Level, Verdict
from jury.schemas.status import BatchState, BatchStatus

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: four observers,
# twelve units, missing values. Published: interval 0.849, ordinal 0.815.
KRIPPENDORFF_EXAMPLE: list[list[float | None]] = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]


def units_of(coders: list[list[float | None]]) -> list[list[float | None]]:
    """Coder-major rows (the package's layout) turned into one row per unit."""
    return [list(unit) for unit in zip(*coders, strict=True)]


def reference_alpha(coders: list[list[float | None]], level: AlphaLevel) -> float:
    data = np.array([[np.nan if v is None else v for v in row] for row in coders], dtype=float)
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))


def verdict(item: str, criterion: str, scores: dict[str, list[float] | None]) -> Verdict:
    """A record whose judges scored these samples (None: the judge produced no score)."""
    evaluations = {
        judge: JudgeEvaluation(
            samples=samples or [],
            aggregated_score=sum(samples) / len(samples) if samples else None,
            within_model_std=None,
            n_failed=0 if samples else 1,
        )
        for judge, samples in scores.items()
    }
    finals = [e.aggregated_score for e in evaluations.values() if e.aggregated_score is not None]
    final = sum(finals) / len(finals) if finals else None
    return Verdict(
        item_id=item,
        criterion_id=criterion,
        llm_evaluations=evaluations,
        consensus_metrics=ConsensusMetrics(
            final_score=final,
            cross_model_std=0.0,
            consensus_level=Level.HIGH,
            confidence=Level.HIGH,
            flag_for_review=False,
        ),
        passed=None if final is None else final >= 3.5,
        threshold=3.5,
    )


def verdicts_from_table(
    coders: list[list[float | None]], criterion: str = "relevance"
) -> list[Verdict]:
    names = [f"judge{c}" for c in range(len(coders))]
    return [
        verdict(
            f"i{u}",
            criterion,
            {
                name: None if value is None else [value]
                for name, value in zip(names, unit, strict=True)
            },
        )
        for u, unit in enumerate(units_of(coders))
    ]


# --- Krippendorff's alpha ---------------------------------------------------------------------


def test_alpha_reproduces_krippendorffs_worked_example() -> None:
    units = units_of(KRIPPENDORFF_EXAMPLE)
    assert round(krippendorff_alpha(units, "interval") or 0, 3) == 0.849
    assert round(krippendorff_alpha(units, "ordinal") or 0, 3) == 0.815
    for level in ("interval", "ordinal"):
        assert krippendorff_alpha(units, level) == pytest.approx(
            reference_alpha(KRIPPENDORFF_EXAMPLE, level), abs=1e-12
        )


@pytest.mark.parametrize("level", ["interval", "ordinal"])
def test_alpha_matches_the_krippendorff_package_on_random_tables(level: AlphaLevel) -> None:
    rng = random.Random(7)
    for _ in range(60):
        n_coders, n_units = rng.randint(2, 5), rng.randint(3, 40)
        # Judge means of three samples on a 1..5 scale, some judges failing on some items.
        coders: list[list[float | None]] = [
            [None if rng.random() < 0.2 else rng.randint(3, 15) / 3 for _ in range(n_units)]
            for _ in range(n_coders)
        ]
        try:
            expected: float | None = reference_alpha(coders, level)
        except ValueError:  # the package refuses tables where alpha is undefined
            expected = None
        mine = krippendorff_alpha(units_of(coders), level)
        if expected is None:
            assert mine is None
        else:
            assert mine == pytest.approx(expected, abs=1e-9)


def test_interval_and_ordinal_alpha_differ_where_distances_are_uneven() -> None:
    # One far outlier weighs heavily on interval distances but counts one rank on ordinal ones.
    coders: list[list[float | None]] = [[1, 2, 3, 4, 5], [1, 2, 3, 4, 30]]
    interval = krippendorff_alpha(units_of(coders), "interval")
    ordinal = krippendorff_alpha(units_of(coders), "ordinal")
    assert interval == pytest.approx(reference_alpha(coders, "interval"))
    assert ordinal == pytest.approx(reference_alpha(coders, "ordinal"))
    assert ordinal is not None and interval is not None and ordinal > interval


def test_per_dimension_alpha_from_records_matches_the_reference() -> None:
    report = batch_agreement(verdicts_from_table(KRIPPENDORFF_EXAMPLE))
    agreement = report.dimensions["relevance"]
    assert agreement.alpha_interval == pytest.approx(0.8491071428571428)
    assert agreement.alpha_ordinal == pytest.approx(0.8153875037548814)
    assert agreement.alpha_note is None
    assert agreement.judges == ["judge0", "judge1", "judge2", "judge3"]
    assert agreement.n_items == 11  # unit 12 has a single value: not pairable


def test_overall_alpha_pools_the_cells_of_every_dimension() -> None:
    first: list[list[float | None]] = [[1.0, 2.0, 4.0, 5.0], [2.0, 2.0, 5.0, 4.0]]
    second: list[list[float | None]] = [[3.0, 1.0, 5.0], [3.0, 2.0, 4.0]]
    records = verdicts_from_table(first, "a") + verdicts_from_table(second, "b")
    report = batch_agreement(records)
    pooled = [first[0] + second[0], first[1] + second[1]]
    assert report.overall.alpha_interval == pytest.approx(reference_alpha(pooled, "interval"))
    assert report.dimensions["a"].alpha_interval == pytest.approx(
        reference_alpha(first, "interval")
    )
    assert report.overall.n_items == 7


def test_a_failed_judge_is_a_missing_value() -> None:
    coders: list[list[float | None]] = [
        [1, 2, 3, 4, 5, 2],
        [1, 3, None, 4, 4, None],
        [2, 2, 3, 5, 5, 1],
    ]
    agreement = batch_agreement(verdicts_from_table(coders)).dimensions["relevance"]
    assert agreement.alpha_interval == pytest.approx(reference_alpha(coders, "interval"))
    assert agreement.alpha_ordinal == pytest.approx(reference_alpha(coders, "ordinal"))
    pair = next(p for p in agreement.spearman if (p.judge_a, p.judge_b) == ("judge0", "judge1"))
    assert pair.n_items == 4


def test_constant_scores_leave_alpha_undefined_with_a_reason() -> None:
    agreement = batch_agreement(verdicts_from_table([[3, 3, 3], [3, 3, 3]])).overall
    assert agreement.alpha_interval is None and agreement.alpha_ordinal is None
    assert agreement.alpha_note is not None and "every score is the same" in agreement.alpha_note
    assert agreement.spearman[0].spearman is None  # constant ranks correlate with nothing
    assert agreement.within_model_variance_share is None


def test_a_single_judge_leaves_alpha_undefined_with_a_reason() -> None:
    report = batch_agreement(verdicts_from_table([[1, 2, 3, 4]]))
    agreement = report.dimensions["relevance"]
    assert agreement.alpha_interval is None and agreement.alpha_ordinal is None
    assert agreement.alpha_note == "alpha needs two judges or more; this panel has 1"
    assert agreement.spearman == []
    assert agreement.bias[0].mean_offset is None and agreement.bias[0].n_items == 0
    assert agreement.n_items == 0


def test_judges_that_never_meet_leave_alpha_undefined() -> None:
    agreement = batch_agreement(verdicts_from_table([[1, 2, None, None], [None, None, 4, 5]]))
    overall = agreement.overall
    assert overall.alpha_interval is None
    assert overall.alpha_note == "no item was scored by two judges or more"
    assert overall.spearman[0].spearman is None and overall.spearman[0].n_items == 0


def test_no_records_gives_an_empty_report() -> None:
    report = batch_agreement([])
    assert report.dimensions == {}
    assert report.overall.alpha_interval is None and report.overall.judges == []


# --- Spearman ---------------------------------------------------------------------------------


def test_spearman_hand_computed_with_ties() -> None:
    # ranks y: 5→1, 6→2, 7→3.5, 8→5, 7→3.5; Σdxdy = 8, Σdx² = 10, Σdy² = 9.5.
    assert spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]) == pytest.approx(8 / math.sqrt(95))


def test_spearman_is_about_order_not_offsets() -> None:
    assert spearman([1, 2, 3, 4], [2.5, 3, 4.5, 5]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [5, 3, 2, 1]) == pytest.approx(-1.0)


def test_spearman_undefined_cases() -> None:
    assert spearman([], []) is None
    assert spearman([3], [4]) is None
    assert spearman([1, 2, 3], [4, 4, 4]) is None
    with pytest.raises(ValueError, match="same length"):
        spearman([1, 2], [1])


def test_pairwise_spearman_from_records() -> None:
    coders: list[list[float | None]] = [[1, 2, 3, 4, 5], [5, 6, 7, 8, 7], [5, 4, 3, 2, 1]]
    pairs = {
        (p.judge_a, p.judge_b): p
        for p in batch_agreement(verdicts_from_table(coders)).overall.spearman
    }
    assert set(pairs) == {("judge0", "judge1"), ("judge0", "judge2"), ("judge1", "judge2")}
    assert pairs[("judge0", "judge1")].spearman == pytest.approx(8 / math.sqrt(95))
    assert pairs[("judge0", "judge2")].spearman == pytest.approx(-1.0)
    assert pairs[("judge0", "judge1")].n_items == 5


# --- bias and within-model variance share -----------------------------------------------------


def test_bias_is_the_mean_offset_from_the_judges_of_each_item() -> None:
    records = [
        verdict("q1", "relevance", {"a": [4], "b": [2], "c": [3]}),  # mean 3: +1, -1, 0
        verdict("q2", "relevance", {"a": [5], "b": [3], "c": None}),  # mean 4: +1, -1
        verdict("q3", "relevance", {"a": [5], "b": None, "c": None}),  # alone: no offset
    ]
    bias = {b.judge: b for b in batch_agreement(records).dimensions["relevance"].bias}
    assert (bias["a"].mean_offset, bias["a"].n_items) == (pytest.approx(1.0), 2)
    assert (bias["b"].mean_offset, bias["b"].n_items) == (pytest.approx(-1.0), 2)
    assert (bias["c"].mean_offset, bias["c"].n_items) == (pytest.approx(0.0), 1)


def test_within_model_variance_share_hand_computed() -> None:
    # a = [1, 3] (mean 2), b = [5, 7] (mean 6), grand mean 4:
    # within = (1 + 1) + (1 + 1) = 4; between = 2·(2-4)² + 2·(6-4)² = 16; share 4 / 20.
    records = [verdict("q1", "relevance", {"a": [1, 3], "b": [5, 7]})]
    assert batch_agreement(records).overall.within_model_variance_share == pytest.approx(0.2)
    # A second cell where the judges agree but wobble: within 2·(0.5² · 2) = 1, between 0.
    records.append(verdict("q2", "relevance", {"a": [3, 4], "b": [3, 4]}))
    assert batch_agreement(records).overall.within_model_variance_share == pytest.approx(5 / 21)


def test_the_accumulator_streams_what_batch_agreement_computes() -> None:
    records = verdicts_from_table(KRIPPENDORFF_EXAMPLE)
    accumulator = AgreementAccumulator()
    for record in records:
        assert accumulator.add(record) is record
    assert accumulator.report() == batch_agreement(records)


# --- what `jury results` shows ----------------------------------------------------------------


def batch_status(n: int) -> BatchStatus:
    now = datetime.now(UTC)
    return BatchStatus(
        batch_id="b1",
        name="agree",
        status=BatchState.COMPLETED,
        n_items=n,
        n_cells=n,
        n_samples_expected=4 * n,
        n_verdicts=n,
        n_samples=4 * n,
        n_failed_samples=0,
        n_flagged=0,
        cost_usd=0.0,
        error=None,
        created_at=now,
        finished_at=now,
    )


def test_json_results_carry_the_agreement_summary() -> None:
    records = verdicts_from_table(KRIPPENDORFF_EXAMPLE)
    out = io.StringIO()
    write_json(out, batch_status(len(records)), records)
    summary = json.loads(out.getvalue())["summary"]
    agreement = summary["agreement"]
    assert agreement["dimensions"]["relevance"]["alpha_interval"] == pytest.approx(0.849, abs=5e-4)
    assert agreement["overall"]["alpha_ordinal"] == pytest.approx(0.815, abs=5e-4)
    assert {b["judge"] for b in agreement["overall"]["bias"]} == {f"judge{c}" for c in range(4)}
    assert len(agreement["overall"]["spearman"]) == 6
    assert "within_model_variance_share" in agreement["overall"]


def test_the_table_summary_shows_the_agreement() -> None:
    records = verdicts_from_table(KRIPPENDORFF_EXAMPLE) + verdicts_from_table(
        [[3, 3], [3, 3]], "tone"
    )
    console = Console(record=True, width=200)
    summary = Summary()
    for record in records:
        summary.add(record)
    print_summary(console, batch_status(len(records)), summary)
    text = console.export_text()
    assert "agreement between judges" in text
    assert "α interval" in text and "α ordinal" in text
    relevance = next(line for line in text.splitlines() if line.strip().startswith("relevance"))
    assert "0.85" in relevance and "0.82" in relevance
    assert "tone: α undefined, every score is the same" in text
