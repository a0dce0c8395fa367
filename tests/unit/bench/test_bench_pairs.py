"""bench/throughput's pairing: each jury run against the baseline run of its round, and
against the metrics run of its round; and bench/ratelimit's leanest second."""

from __future__ import annotations

from bench.metrics_cost import metrics_pairs
from bench.ratelimit_figures import _leanest_second
from bench.throughput import AFTER_ITS_IMPORTS, metrics_summary, pair_ratios


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


def test_each_jury_run_is_paired_with_the_metrics_run_of_its_round() -> None:
    """bench/throughput's metrics on/off pairs: in either order within a round; a run
    without its other half is left out."""

    def run(label: str, cpu: float, rate: int) -> dict[str, object]:
        return {"run": label, "cpu_ms": {"workers": cpu}, "judgments_per_s": rate}

    rows = [
        run("jury-600", 8.0, 100),
        run("jury-600-metrics", 8.2, 98),
        run("asyncio baseline", 5.0, 300),
        run("jury-600-metrics", 7.8, 105),  # the next round, metrics first
        run("jury-600", 8.0, 100),
        run("jury-600", 9.0, 90),  # alone
    ]
    assert metrics_pairs(rows, "jury-600") == [
        {"workers_cpu_ratio": 1.025, "speed_ratio": 0.98},
        {"workers_cpu_ratio": 0.975, "speed_ratio": 1.05},
    ]


def test_the_recording_s_share_of_a_judgment() -> None:
    rows: list[dict[str, object]] = [
        {"run": "jury-600", "cpu_ms": {"workers": 8.0}, "judgments_per_s": 100},
        {
            "run": "jury-600-metrics",
            "cpu_ms": {"workers": 8.1},
            "judgments_per_s": 100,
            "calls_per_judgment": 1.0,
        },
        {"run": "recording", "recording_us_per_call": 4.0},
    ]
    summary = metrics_summary(rows, "jury-600")
    assert summary["metrics_recording"]["share_of_judgment_pct"] == 0.05  # 4 µs of 8 ms
    assert summary["metrics_median_cpu_ratio"] == 1.012
