"""bench/footprint and bench/ratelimit's pairing of a throttled run with its unthrottled one."""

from __future__ import annotations

import os

from bench.footprint import Footprint, pss_bytes, tree_cpu_s
from bench.ratelimit_figures import with_unthrottled


def test_a_process_has_cpu_and_pss() -> None:
    assert tree_cpu_s(os.getpid()) > 0
    assert pss_bytes(os.getpid()) > 1024 * 1024


def test_a_footprint_counts_a_process_that_ended_by_its_exit_status() -> None:
    footprint = Footprint({"this": os.getpid()}, interval_s=60)
    footprint.start()
    footprint.add("producer", os.getpid())
    footprint.ended("producer", 1.25)
    spent = footprint.stop()
    assert spent["cpu_s"]["producer"] == 1.25
    assert spent["cpu_s_total"] >= 1.25
    assert spent["peak_pss_mb"]["this"] > 1
    assert spent["peak_pss_mb_sum"] >= spent["peak_pss_mb"]["this"]


def test_each_throttled_run_is_set_beside_the_unthrottled_one_with_as_many_workers() -> None:
    rows = [
        {"run": "jury-2w-free", "workers": 2, "quota": False, "cpu_ms_per_judgment": 2.0},
        {"run": "jury-2w", "workers": 2, "quota": True, "cpu_ms_per_judgment": 3.0},
        {"run": "jury-4w", "workers": 4, "quota": True, "cpu_ms_per_judgment": 5.0},
        {"run": "asyncio baseline", "makespan_s": 60.0},
    ]
    paired = with_unthrottled(rows)
    assert paired[1]["unthrottled_cpu_ms_per_judgment"] == 2.0
    assert paired[1]["cpu_ratio_to_unthrottled"] == 1.5
    assert "cpu_ratio_to_unthrottled" not in paired[2]  # no unthrottled run with 4 workers
    assert "cpu_ratio_to_unthrottled" not in paired[0]
