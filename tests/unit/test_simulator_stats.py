"""The simulator's /stats: when the first request came and when answers were sent, on its
own clock, which the rate-limit benchmark splits a run's start by."""

from __future__ import annotations

from jury.simulator.stats import AnswerStats


def test_first_request_and_answer_spans_are_on_the_simulators_clock() -> None:
    now = [100.0]
    stats = AnswerStats(clock=lambda: now[0])
    assert stats.snapshot()["first_request_s"] is None
    now[0] = 101.5
    stats.enter("fast")
    now[0] = 102.0
    stats.enter("slow")  # a later request does not move the first
    now[0] = 101.9 + 0.5
    stats.leave("fast")
    stats.record_status("fast", 200)
    now[0] = 103.0
    stats.record_status("fast", 429)  # only answers that went through count as answered
    snapshot = stats.snapshot()
    assert snapshot["first_request_s"] == 1.5
    assert snapshot["answered_s"] == {"fast": [2.4, 2.4]}
    stats.reset()
    assert stats.snapshot()["first_request_s"] is None
