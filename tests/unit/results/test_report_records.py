"""The report's record view and alarm: text from items and providers is escaped, the filters'
data is there, and the alarm names each failing judge."""

from __future__ import annotations

from jury.results.html.records import RecordsSection, alarm_html
from jury.schemas.outcome import JudgeFailures
from jury.schemas.results import ConsensusMetrics, JudgeEvaluation, Level, SampleResult, Verdict
from jury.schemas.status import BatchState
from jury.store.inspection import StoredSample
from tests.unit.producer.test_progress import status

EVIL = '<script>alert(1)</script><img src=x onerror="alert(2)">'


def verdict(item: str, flagged: bool) -> Verdict:
    return Verdict(
        item_id=item,
        criterion_id="tone",
        llm_evaluations={
            "j<1>": JudgeEvaluation(samples=[4], aggregated_score=4, within_model_std=0)
        },
        consensus_metrics=ConsensusMetrics(
            final_score=4.0,
            cross_model_std=0.0,
            consensus_level=Level.HIGH,
            confidence=Level.HIGH,
            flag_for_review=flagged,
        ),
        passed=True,
        threshold=3.5,
        flag_reasons=[EVIL] if flagged else [],
    )


def test_records_escape_everything_and_carry_their_filters() -> None:
    section = RecordsSection(["j<1>"], ["tone"], limit=1)
    section.add(verdict(EVIL, True))
    section.add(verdict("second", False))
    section.set_samples(
        [
            StoredSample(
                EVIL,
                "tone",
                SampleResult(judge="j<1>", sample=0, score=4, reasoning=EVIL, latency_ms=12.0),
            ),
            StoredSample(
                EVIL, "tone", SampleResult(judge="j<1>", sample=1, error=EVIL, error_kind="auth")
            ),
        ]
    )
    page = section.html()
    assert "<script>" not in page and "<img" not in page and "&lt;script&gt;" in page
    assert 'data-flagged="1"' in page and 'data-dimension="tone"' in page
    assert page.count('data-judge="j&lt;1&gt;"') == 2 and "12 ms" in page
    assert "the first 1 of 2" in page and section.item_ids() == [EVIL]


def test_the_alarm_names_each_failing_judge() -> None:
    failure = JudgeFailures(
        judge="j<1>", model="openai/x", judged=2, failed=1, kinds={"auth": 1}, sample_message=EVIL
    )
    alarm = alarm_html(status(status=BatchState.DEGRADED, n_failed_samples=1), [failure])
    assert alarm.startswith('<div class="alarm" id="alarm" role="alert"><h2>This batch is degraded')
    assert "judge j&lt;1&gt; (openai/x) failed 1 of 2" in alarm and "<script>" not in alarm
    assert alarm_html(status(status=BatchState.COMPLETED, n_failed_samples=0), []) == ""
