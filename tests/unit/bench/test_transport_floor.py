"""bench/throughput's floor line: jury's CPU per judgment as a multiple of the bare transport's."""

from __future__ import annotations

from bench.throughput import AFTER_ITS_IMPORTS, jury_cpu_ms
from bench.transport_floor import FLOOR_CPU, FLOOR_LABEL, floor_multiples


def test_each_jury_run_and_the_baseline_as_a_multiple_of_the_floor() -> None:
    rows = [
        {"run": "jury-6000", "cpu_ms": {"workers": 2.0, "producer": 0.2, "simulator (x)": 0.5}},
        {"run": "asyncio baseline", "cpu_ms": {"baseline process": 5.0, AFTER_ITS_IMPORTS: 2.8}},
        {"run": FLOOR_LABEL, "cpu_ms": {FLOOR_CPU: 0.2}},
        {"run": FLOOR_LABEL, "cpu_ms": {FLOOR_CPU: 0.2}},
    ]
    assert floor_multiples(rows, jury_cpu_ms) == {
        "jury-6000": 11.0,  # the simulator is not jury's
        "asyncio baseline (after its imports)": 14.0,
    }


def test_without_a_floor_run_nothing_is_printed() -> None:
    assert floor_multiples([{"run": "jury-6000", "cpu_ms": {"workers": 2.0}}], jury_cpu_ms) == {}
