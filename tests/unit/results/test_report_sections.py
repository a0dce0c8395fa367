"""The HTML report's sections and charts: their figures, by hand, and their escaping."""

from __future__ import annotations

import statistics

import pytest

from jury.analysis.agreement import batch_agreement
from jury.errors import ConfigurationError
from jury.local.flower import check_basic_auth, check_flower_options, format_task, label_args
from jury.results.html.flagged import FlaggedSection, review_priority
from jury.results.html.sections import (
    AgreementSection,
    DimensionScores,
    DistributionSection,
    JudgeComparisonSection,
    Moments,
    agreement_html,
    bin_width,
)
from jury.results.html.svg_charts import Bar, histogram
from jury.schemas.batch import Dimension
from jury.schemas.results import ConsensusMetrics, JudgeEvaluation, Level, Verdict

JUDGES = ["a", "b", "c"]


def verdict(
    scores: dict[str, float | None],
    *,
    item: str = "q1",
    criterion: str = "relevance",
    final: float | None = None,
    std: float | None = None,
    level: Level | None = Level.HIGH,
    flag: bool = False,
    n_failed: int = 0,
    reasons: list[str] | None = None,
) -> Verdict:
    present = [s for s in scores.values() if s is not None]
    if final is None and present:
        final = statistics.mean(present)
    return Verdict(
        item_id=item,
        criterion_id=criterion,
        llm_evaluations={
            j: JudgeEvaluation(
                samples=[] if s is None else [s],
                aggregated_score=s,
                within_model_std=None if s is None else 0.0,
                n_failed=n_failed if s is None else 0,
            )
            for j, s in scores.items()
        },
        consensus_metrics=ConsensusMetrics(
            final_score=final,
            cross_model_std=std,
            consensus_level=level,
            confidence=Level.HIGH if level == Level.HIGH else Level.LOW,
            flag_for_review=flag,
        ),
        passed=None if final is None else final >= 3.5,
        threshold=3.5,
        flag_reasons=reasons or [],
    )


def test_moments_match_the_statistics_module() -> None:
    values = [1.0, 2.5, 4.0, 4.0, 5.0]
    moments = Moments()
    for value in values:
        moments.add(value)
    assert moments.mean == pytest.approx(statistics.mean(values))
    assert moments.std == pytest.approx(statistics.stdev(values))
    single = Moments()
    single.add(3.0)
    assert single.std == 0.0 and Moments().mean is None and Moments().std is None


def test_distribution_bins_scores_over_the_scale() -> None:
    section = DistributionSection([Dimension.model_validate("relevance")])  # scale 1–5
    for final in (1.0, 1.49, 3.5, 4.99, 5.0):
        section.add(verdict({"a": final}))
    section.add(verdict({"a": None}, level=None))
    scores = section.dimensions["relevance"]
    # 8 bins of width 0.5 from 1: 1.0 and 1.49 in the first, 3.5 in the sixth, 5.0 in the last
    assert scores.bins == [2, 0, 0, 0, 0, 1, 0, 2]
    assert scores.unscored == 1 and scores.passed == 3
    assert scores.consensus == {"HIGH": 5, "NONE": 1}
    html = section.html()
    assert html.count("<rect") == 8 and "threshold 3.5, passed 60%" in html


def test_bins_have_widths_a_reader_can_follow() -> None:
    assert bin_width(1, 5) == 0.5 and bin_width(1, 10) == 1 and bin_width(0, 100) == 10
    tone = DimensionScores(low=1, high=10, threshold=6)
    assert len(tone.bins) == 9 and tone.bin_of(10) == 8 and tone.bin_of(5.99) == 4
    assert DimensionScores(low=0, high=1, threshold=0.5).bin_of(0.3) == 3  # not 2.999…


def test_judge_comparison_means_and_failures() -> None:
    dimensions = [Dimension.model_validate("relevance"), Dimension.model_validate("depth")]
    section = JudgeComparisonSection(dimensions, JUDGES)
    section.add(verdict({"a": 4.0, "b": 2.0, "c": None}, n_failed=3))
    section.add(verdict({"a": 5.0, "b": 3.0, "c": 4.0}))
    section.add(verdict({"a": 1.0}, criterion="depth"))
    assert section.scores[("relevance", "a")].mean == pytest.approx(4.5)
    assert section.scores[("relevance", "c")].n == 1
    assert section.unscored[("relevance", "c")] == 1
    assert section.failed_samples[("relevance", "c")] == 3
    assert section.scores[("depth", "a")].mean == pytest.approx(1.0)
    html = section.html()
    assert "4.50 ± 0.71" in html and "3 failed samples" in html and "no score on 1" in html


def test_agreement_offsets_and_pairwise_differences_by_hand() -> None:
    records = [
        verdict({"a": 4.0, "b": 2.0, "c": 3.0}),  # final 3: offsets +1, -1, 0
        verdict({"a": 5.0, "b": 5.0, "c": 2.0}),  # final 4: offsets +1, +1, -2
        verdict({"a": 3.0, "b": None, "c": 1.0}),  # final 2: offsets +1, -, -1
    ]
    section = AgreementSection(JUDGES)
    for record in records:
        section.add(record)
    assert section.offsets["a"].mean == pytest.approx(1.0)
    assert section.offsets["b"].mean == pytest.approx(0.0)
    assert section.offsets["c"].mean == pytest.approx(-1.0)
    assert section.abs_offsets["b"].mean == pytest.approx(1.0)
    assert section.pairs[("a", "b")].mean == pytest.approx(1.0)  # |2|, |0|
    assert section.pairs[("a", "c")].mean == pytest.approx((1 + 3 + 2) / 3)
    assert section.pairs[("b", "c")].n == 2
    html = agreement_html(records, JUDGES)
    assert "2.00" in html and "-1.000" in html and "harsher" in html


def test_agreement_section_shows_the_batch_reliability_statistics() -> None:
    records = [
        verdict({"a": 1.0, "b": 2.0, "c": 1.0}, item="q1"),
        verdict({"a": 3.0, "b": 3.0, "c": 4.0}, item="q2"),
        verdict({"a": 5.0, "b": 4.0, "c": 5.0}, item="q3"),
        verdict({"a": 2.0, "b": 2.0, "c": None}, item="q4"),
    ]
    expected = batch_agreement(records).overall
    html = agreement_html(records, JUDGES)
    assert "Reliability across judges" in html
    assert expected.alpha_interval is not None and expected.alpha_ordinal is not None
    assert f"<td>{expected.alpha_interval:.3f}</td>" in html
    assert f"<td>{expected.alpha_ordinal:.3f}</td>" in html
    # A single judge: alpha is undefined and the section says why.
    lone = agreement_html([verdict({"a": 3.0})], ["a"])
    assert "α interval" in lone and "—" in lone


def test_agreement_with_one_judge_says_so() -> None:
    assert "nothing to compare" in agreement_html([verdict({"a": 3.0})], ["a"])


def test_review_order_and_the_kept_few() -> None:
    no_score = verdict({"a": None}, item="none", final=None, level=None, flag=True)
    wide = verdict({"a": 1.0, "b": 5.0}, item="wide", std=2.8, level=Level.LOW, flag=True)
    narrow = verdict({"a": 2.0, "b": 4.5}, item="narrow", std=1.7, level=Level.LOW, flag=True)
    failed = verdict({"a": 3.0, "b": None}, item="failed", std=0.0, n_failed=1, flag=True)
    calm = verdict({"a": 3.0, "b": 3.0}, item="calm", std=0.0)
    assert review_priority(no_score)[0] == 0 and review_priority(failed)[0] == 2
    section = FlaggedSection(["a", "b"], limit=3)
    for record in (failed, calm, narrow, wide, no_score):
        section.add(record)
    assert section.n_flagged == 4
    assert [v.item_id for v in section.kept()] == ["none", "wide", "narrow"]


def test_flagged_ties_keep_the_first_seen() -> None:
    section = FlaggedSection(["a"], limit=2)
    for name in ("first", "second", "third"):
        section.add(verdict({"a": 1.0}, item=name, std=2.0, level=Level.LOW, flag=True))
    assert [v.item_id for v in section.kept()] == ["first", "second"]


def test_untrusted_text_is_escaped_everywhere() -> None:
    evil = '<img src=x onerror="alert(1)">'
    section = FlaggedSection([evil], limit=5)
    section.add(
        verdict({evil: 1.0}, item=evil, std=2.0, level=Level.LOW, flag=True, reasons=[evil])
    )
    html = section.html()
    assert "<img" not in html and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html
    chart = histogram([Bar(evil, 1, evil)], evil)
    assert "<img" not in chart and "&lt;img" in chart
    assert "<img" not in agreement_html([verdict({evil: 2.0})], [evil])


def test_flower_labels_judge_task_arguments() -> None:
    assert label_args("('b1', 'q1', 'tone', 'openai/x', 2)") == (
        "batch=b1 item=q1 dimension=tone judge=openai/x sample=2"
    )
    labelled = label_args("['b1', 'q1', 'tone', 'openai/x', 0]")
    assert labelled is not None and labelled.startswith("batch=b1 ")
    for unchanged in (None, "", "('only', 'two')", "not python", "__import__('os')"):
        assert label_args(unchanged) == unchanged

    class Task:
        name, args = "jury.judge_sample", "('b', 'i', 'd', 'j', 0)"

    assert format_task(Task()).args == "batch=b item=i dimension=d judge=j sample=0"
    Task.name = "celery.backend_cleanup"
    assert format_task(Task()).args == "('b', 'i', 'd', 'j', 0)"


def test_flower_login_must_be_user_and_password() -> None:
    check_basic_auth(None)
    check_basic_auth("u:p,other:secret:with:colons")
    for bad in ("s3cr3t-no-colon", "alice-xyz:", ":hunter2-pw", "u:p,,"):
        with pytest.raises(ConfigurationError, match="must be user:password") as caught:
            check_basic_auth(bad)
        assert bad.strip(":,") not in str(caught.value), "the login must not be echoed"


def test_flower_options_after_the_separator_must_be_flower_s() -> None:
    check_flower_options(("--url_prefix=flower", "--persistent=True", "--max-tasks=5000"))
    for bad in ("--adress=0.0.0.0", "url_prefix=x", "--", "-p"):
        with pytest.raises(ConfigurationError, match="is not a Flower option"):
            check_flower_options((bad,))
