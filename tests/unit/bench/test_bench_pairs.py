"""bench/throughput's pairing: each jury run against the baseline run of its round; and
bench/ratelimit's leanest second."""

from __future__ import annotations

from bench.ratelimit import _leanest_second
from bench.throughput import AFTER_ITS_IMPORTS, pair_ratios


def test_each_jury_run_is_paired_with_the_baseline_after_it() -> None:
    def jury(cpu: float, rate: int) -> dict[str, object]:
        cpu_ms = {"producer": 0.2, "workers": cpu, "redis": 0.1, "simulator (not jury)": 9.0}
        return {"run": "jury-600", "cpu_ms": cpu_ms, "judgments_per_s": rate}

    def baseline(cpu: float, rate: int) -> dict[str, object]:
        cpu_ms = {"baseline process": cpu, AFTER_ITS_IMPORTS: cpu / 2, "simulator (not jury)": 9.0}
        return {"run": "asyncio baseline", "cpu_ms": cpu_ms, "judgments_per_s": rate}

    rows = [
        {"run": "publish", "cpu_ms": {}, "judgments_per_s": 0},
        jury(5.7, 200),
        baseline(5.0, 100),
        baseline(1.0, 1),  # no jury run before it in its round: unpaired
        jury(3.7, 150),
        baseline(4.0, 300),
        jury(1.0, 1),  # no baseline after it: unpaired
    ]
    assert pair_ratios(rows, "jury-600") == [
        {"cpu_ratio": 1.2, "cpu_ratio_after_imports": 2.4, "speed_ratio": 2.0},
        {"cpu_ratio": 1.0, "cpu_ratio_after_imports": 2.0, "speed_ratio": 0.5},
    ]


def test_the_leanest_second_of_a_rate_limit_run_shows_a_stall() -> None:
    """bench/ratelimit: a model answered at its quota but for one stalled second shows that
    second; its first and last seconds (partial) do not count."""
    assert _leanest_second([3, 20, 20, 9, 20, 20, 4], rpm=1200) == {
        "leanest_second": 0.45,
        "at_s": 3,
    }
    assert _leanest_second([20, 20], rpm=1200) == {}
