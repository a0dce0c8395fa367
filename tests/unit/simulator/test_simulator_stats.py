"""The simulator's /stats: when the first request came and when answers were sent, on its
own clock, which the rate-limit benchmark splits a run's start by."""

from __future__ import annotations

from jury.simulator.stats import ARRIVALS_KEPT, SECONDS_COUNTED, AnswerStats


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


def test_answers_are_counted_per_second_from_a_model_s_first() -> None:
    now = [0.0]
    stats = AnswerStats(clock=lambda: now[0])
    for at in [10.0, 10.5, 11.2, 13.9, 10.0 + SECONDS_COUNTED + 1]:
        now[0] = at
        stats.record_status("fast", 200)
    stats.record_status("fast", 429)
    # The second with no answer is a zero; answers past SECONDS_COUNTED are not counted.
    assert stats.snapshot()["answered_per_s"] == {"fast": [2, 1, 0, 1]}
    stats.reset()
    assert stats.snapshot()["answered_per_s"] == {}


def test_arrivals_at_a_limited_model_are_kept_with_their_decision_and_port() -> None:
    now = [5.0]
    stats = AnswerStats(clock=lambda: now[0])
    now[0] = 6.25
    stats.record_arrival("fast", True, 40001)
    now[0] = 6.5
    stats.record_arrival("fast", False, 40002)
    assert stats.arrivals() == {"fast": [(1.25, 1, 40001), (1.5, 0, 40002)]}
    stats.reset()
    assert stats.arrivals() == {}


def test_arrivals_kept_are_bounded() -> None:
    stats = AnswerStats(clock=lambda: 0.0)
    for _ in range(ARRIVALS_KEPT + 10):
        stats.record_arrival("fast", True, 1)
    assert len(stats.arrivals()["fast"]) == ARRIVALS_KEPT
