"""The trust report from result records (schemas.trust_records, schemas.trust_analysis), the
calibration fitted to them (schemas.calibration_fit) and applied when records are read
(producer.labelled_records), on hand-made records and on simulated panels."""

from __future__ import annotations

import json
import random
import statistics

import pytest

from jury.analysis.calibration import calibrate_scores, fit_calibration, fold_of
from jury.analysis.trust import trust_report
from jury.results.labelled import with_trust_parts
from jury.schemas.batch import Item
from jury.schemas.calibration import Calibration
from jury.schemas.pairwise import PairwiseOutcome
from jury.schemas.results import Verdict
from jury.schemas.trust_records import TrustRecords
from jury.simulator.labels import human_score
from jury.simulator.personas import PERSONAS, judge_score
from tests.unit.analysis.test_agreement import verdict as scored_record

SEED = 11


def record(
    item_id: str,
    scores: dict[str, float | None],
    label: float | str | None = None,
    dimension: str = "relevance",
    pairwise: str | None = None,
) -> Verdict:
    """A record of these judges' scores (tests.unit.analysis.test_agreement's), with people's label
    and,
    in a pairwise batch, the panel's winner."""
    plain = scored_record(
        item_id, dimension, {j: None if s is None else [s] for j, s in scores.items()}
    )
    if pairwise is None:
        return plain.model_copy(update={"human_label": label})
    outcome = PairwiseOutcome(
        winner=pairwise,
        preference=plain.consensus_metrics.final_score,
        score_a=None,
        score_b=None,
        tie_tolerance=0.5,
        n_judgments=len(scores),
        n_agreeing=0,
        agreement_pct=None,
        n_position_consistent=0,
        position_consistency_pct=None,
        first_position_bias=None,
    )
    return plain.model_copy(update={"human_label": label, "pairwise": outcome, "passed": None})


def gathered(verdicts: list[Verdict]) -> TrustRecords:
    records = TrustRecords()
    for verdict in verdicts:
        records.add(verdict)
    return records


def simulated_panel(
    personas: list[str], n_items: int = 150, n: int = 3, label: bool = True
) -> list[Verdict]:
    """Records of a simulated panel (the simulator's scoring, without the server), each item
    labelled by simulated people."""
    rng, raters = random.Random(1), random.Random(2)
    verdicts = []
    for i in range(n_items):
        text = f"Answer {i}: restart the router, then check the cable."
        scores: dict[str, float | None] = {}
        for model in personas:
            persona, _, group = model.partition(":")
            samples = [
                judge_score(
                    PERSONAS[persona],
                    seed=SEED,
                    criterion="relevance",
                    output_text=text,
                    data=text,
                    low=1,
                    high=5,
                    temperature=0.8,
                    rng=rng,
                    group=group or None,
                    group_error=0.2,
                )
                for _ in range(n)
            ]
            scores[model] = statistics.fmean(samples)
        people = human_score(SEED, "relevance", text, 1, 5, rng=raters) if label else None
        verdicts.append(record(f"i{i}", scores, people))
    return verdicts


def test_without_labels_only_the_judges_agreement_with_each_other() -> None:
    verdicts = simulated_panel(["balanced:a", "lenient:b", "strict:c"], 40, label=False)
    report = trust_report(gathered(verdicts))
    trust = report.dimensions["relevance"]
    assert report.headline is None and report.n_labelled == 0 and trust.raters == []
    assert trust.errors_vs_labels is None and trust.effective_from_errors is None
    consensus = trust.errors_vs_consensus
    assert consensus is not None and consensus.reference == "consensus"
    assert consensus.n_items == 40 and len(consensus.matrix) == 3
    # deviations from a shared mean: independent judges sit near −1/(k − 1) = −0.5
    off_diagonal = [consensus.matrix[i][j] or 0 for i in range(3) for j in range(3) if i != j]
    assert all(-0.9 < r < 0 for r in off_diagonal)
    scores = trust.effective_from_scores
    assert scores is not None and scores.basis == "scores" and 1 <= (scores.value or 0) <= 3


def test_shared_bias_group_is_worth_fewer_than_two_judges_independent_more() -> None:
    family = trust_report(gathered(simulated_panel(["balanced:g", "lenient:g", "strict:g"])))
    apart = trust_report(gathered(simulated_panel(["balanced:a", "lenient:b", "strict:c"])))
    together = family.dimensions["relevance"].effective_from_errors
    separate = apart.dimensions["relevance"].effective_from_errors
    assert together is not None and separate is not None
    assert (together.value or 9) < 2 < (separate.value or 0)
    comparison = apart.dimensions["relevance"].comparison
    assert comparison is not None and comparison.finding == "better"
    assert apart.headline == comparison.sentence
    assert comparison.sentence.startswith("The panel agrees with people better than its best")


def test_a_perfect_judge_beats_the_panel_and_intervals_hold_the_estimate() -> None:
    rng = random.Random(3)
    verdicts = []
    for i in range(60):
        truth = rng.randint(1, 5)
        wild = min(5, max(1, truth + rng.choice((-2, 2))))
        verdicts.append(record(f"i{i}", {"exact": truth, "wild": wild}, truth))
    trust = trust_report(gathered(verdicts), resamples=200).dimensions["relevance"]
    exact = next(r for r in trust.raters if r.rater == "exact")
    assert exact.mae is not None and exact.mae.value == 0
    assert exact.kendall is not None and exact.kendall.value == 1
    assert exact.pass_accuracy is not None and exact.pass_accuracy.value == 1
    panel = next(r for r in trust.raters if r.rater == "panel")
    for estimate in (panel.spearman, panel.kendall, panel.kappa, panel.mae):
        assert estimate is not None and estimate.value is not None
        assert (estimate.low or 0) <= estimate.value <= (estimate.high or 0)
    comparison = trust.comparison
    assert comparison is not None and comparison.best_judge == "exact"
    assert comparison.finding == "worse" and comparison.sentence.startswith("Its best judge")


def test_pairwise_accuracy_counts_a_tie_as_half() -> None:
    verdicts = [
        record("p1", {"j": 1.0}, "A", "pref", pairwise="A"),
        record("p2", {"j": 0.0}, "B", "pref", pairwise="tie"),  # within the tolerance: a tie
        record("p3", {"j": -2.0}, "A", "pref", pairwise="B"),
        record("p4", {"j": None}, "A", "pref", pairwise=None),  # no score: not counted
    ]
    trust = trust_report(gathered(verdicts), resamples=50).dimensions["pref"]
    assert trust.kind == "pairwise" and trust.n_labelled == 4
    judge = next(r for r in trust.raters if r.rater == "j")
    assert judge.n_items == 3 and judge.accuracy is not None
    assert judge.accuracy.value == pytest.approx(1.5 / 3)
    assert trust.comparison is None  # one judge: nothing to compare the panel with


def test_calibration_fitted_on_some_items_corrects_others() -> None:
    verdicts = simulated_panel(["lenient:a", "lenient:b"], 160)
    train = [v for v in verdicts if fold_of(v.item_id, 2, 0) == 0]
    test = [v for v in verdicts if fold_of(v.item_id, 2, 0) == 1]
    calibration = fit_calibration(gathered(train), {"relevance": (1, 5)})
    fitted = calibration.dimensions["relevance"]
    assert set(fitted.judges) == {"lenient:a", "lenient:b"} and fitted.panel is not None
    assert statistics.fmean(j.weight for j in fitted.judges.values()) == pytest.approx(1)
    # the file round-trips
    assert Calibration.model_validate(json.loads(calibration.model_dump_json())) == calibration

    def error(score: float | None, verdict: Verdict) -> float:
        return abs((score or 0) - float(verdict.human_label or 0))

    raw = statistics.fmean(error(v.consensus_metrics.final_score, v) for v in test)
    calibrated = statistics.fmean(
        error(with_trust_parts(v, None, calibration).calibrated.final_score, v)  # type: ignore[union-attr]
        for v in test
    )
    assert calibrated < raw - 0.2, (raw, calibrated)
    assert calibrate_scores(calibration, "tone", {"lenient:a": 4}, 3.5) is None
    unknown = calibrate_scores(calibration, "relevance", {"someone": 4}, 3.5)
    assert unknown is not None and unknown.final_score is None and unknown.judges == {}


def test_records_carry_labels_and_calibration_only_when_there_are_some() -> None:
    plain = record("i1", {"a": 4.0, "b": 2.0})
    assert with_trust_parts(plain, None, None) is plain
    shown = json.loads(plain.model_dump_json())
    assert "human_label" not in shown and "calibrated" not in shown and "pairwise" not in shown
    labelled = Item(id="i1", output="", labels={"relevance": 5}, label=None)
    enriched = with_trust_parts(plain, labelled, None)
    assert enriched.human_label == 5 and json.loads(enriched.model_dump_json())["human_label"] == 5
    assert (
        with_trust_parts(record("i1", {"a": 4.0}, dimension="tone"), labelled, None).human_label
        is None
    )
    pair = Item(id="p", output_a="x", output_b="y", label="B")
    assert (
        with_trust_parts(record("p", {"a": 1.0}, dimension="tone"), pair, None).human_label == "B"
    )
