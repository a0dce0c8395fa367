"""bench/arrivals: telling where a rate-limit run lost quota from the provider's record."""

from __future__ import annotations

from bench.arrivals import largest_gap, where_quota_went


def test_a_gap_after_a_refusal_is_counted_as_its_cause() -> None:
    arrivals = [(0.0, 1, 1), (0.2, 1, 1), (0.3, 0, 1), (0.4, 1, 1), (1.3, 1, 2), (1.5, 1, 1)]
    assert largest_gap(arrivals) == {"largest_gap_s": 0.9, "gap_at_s": 0.4, "refused_near": 1}
    assert largest_gap([(0.0, 1, 1)]) == {}


def test_a_stalled_worker_shows_as_its_own_silence_across_models() -> None:
    # Worker 0 holds ports 1 and 2, worker 1 port 3; worker 0 sends nothing from 1.0 to 2.5.
    arrivals = {
        "fast": [(0.5, 1, 1), (1.0, 1, 2), (1.5, 1, 3), (2.5, 1, 1), (3.0, 1, 9)],
        "slow": [(0.8, 1, 3), (2.0, 1, 3), (2.8, 1, 2)],
    }
    lost = where_quota_went(arrivals, {1: 0, 2: 0, 3: 1}, workers=2)
    assert lost["worker_silences"] == [
        {"silent_s": 1.5, "at_s": 1.0, "sends": 4},
        {"silent_s": 0.7, "at_s": 0.8, "sends": 3},
    ]
    assert lost["ports_unknown"] == 0.125  # port 9: no sample saw it
    assert lost["gaps"]["fast"]["largest_gap_s"] == 1.0


def test_times_are_counted_from_the_submission() -> None:
    arrivals = {"fast": [(10.0, 1, 1), (10.5, 1, 1), (12.5, 1, 1)]}
    lost = where_quota_went(arrivals, {1: 0}, workers=1, since=10.0)
    assert lost["gaps"]["fast"] == {"largest_gap_s": 2.0, "gap_at_s": 0.5, "refused_near": 0}
    assert lost["worker_silences"] == [{"silent_s": 2.0, "at_s": 0.5, "sends": 3}]
