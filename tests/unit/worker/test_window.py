"""The window of tasks in flight (jury.worker.engine.window): decisions from observations."""

from __future__ import annotations

from jury.errors import JudgmentFailed
from jury.worker.engine.pool import pushed_back
from jury.worker.engine.window import (
    CPU,
    GROW,
    LAG,
    MEMORY,
    PUSHBACK,
    Observation,
    WindowController,
    WindowLimits,
)

MB = 2**20


def limits(ceiling: int = 4096, start: int = 256, memory_mb: int = 450) -> WindowLimits:
    return WindowLimits.of(ceiling, start, memory_mb * MB)


def waiting(window: int, rss_mb: float = 300, **changes: float) -> Observation:
    """A full window of calls waiting on the network, the CPU idle."""
    fields: dict[str, float] = {
        "in_flight": window,
        "cpu_share": 0.2,
        "loop_lag_s": 0.002,
        "ended": 100,
        "pushed_back": 0,
    }
    fields.update(changes)
    return Observation(
        in_flight=int(fields["in_flight"]),
        cpu_share=fields["cpu_share"],
        loop_lag_s=fields["loop_lag_s"],
        rss_bytes=int(rss_mb * MB),
        ended=int(fields["ended"]),
        pushed_back=int(fields["pushed_back"]),
    )


def test_grows_while_calls_wait_and_cpu_is_idle_up_to_the_ceiling() -> None:
    controller = WindowController(limits(ceiling=3000))
    assert controller.window == 256
    seen = []
    for _ in range(10):
        seen.append(controller.decide(waiting(controller.window, rss_mb=250)))
    assert seen[:4] == [512, 1024, 2048, 3000]
    assert controller.window == 3000 and controller.reason == GROW


def test_does_not_grow_when_the_window_is_not_full() -> None:
    controller = WindowController(limits())
    assert controller.decide(waiting(256, in_flight=100)) == 256


def test_does_not_grow_while_the_cpu_is_busy_or_the_loop_lags() -> None:
    controller = WindowController(limits())
    assert controller.decide(waiting(256, cpu_share=0.7)) == 256
    assert controller.decide(waiting(256, loop_lag_s=0.1)) == 256


def test_sustained_cpu_pressure_shrinks_it_back_toward_its_start_never_below() -> None:
    controller = WindowController(limits(), window=2048)
    busy = waiting(2048, cpu_share=0.95)
    assert controller.decide(busy) == 2048  # one busy second is not pressure
    assert controller.decide(busy) == 2048
    assert controller.decide(busy) < 2048
    assert controller.reason == CPU
    for _ in range(60):
        controller.decide(waiting(controller.window, cpu_share=0.95))
    assert controller.window == 256


def test_the_calls_a_growth_let_in_starting_at_once_are_not_pressure() -> None:
    controller = WindowController(limits())
    assert controller.decide(waiting(256)) == 512
    for _ in range(3):  # 256 calls starting at once: the loop lags a while
        assert controller.decide(waiting(512, loop_lag_s=0.5)) == 512
    for _ in range(2):
        assert controller.decide(waiting(512, loop_lag_s=0.5)) == 512
    assert controller.decide(waiting(512, loop_lag_s=0.5)) < 512  # then it is


def test_a_lagging_loop_is_pressure_too() -> None:
    controller = WindowController(limits(), window=1024)
    for _ in range(3):
        controller.decide(waiting(1024, cpu_share=0.4, loop_lag_s=0.5))
    assert controller.window < 1024 and controller.reason == LAG


def test_after_pressure_it_creeps_instead_of_doubling_until_calm_again() -> None:
    controller = WindowController(limits(memory_mb=4000), window=1000)
    for _ in range(3):
        controller.decide(waiting(1000, cpu_share=0.95))
    cut = controller.window
    assert cut == 800
    grown = controller.decide(waiting(cut))
    assert grown == 1000  # a quarter more
    for _ in range(controller.limits.calm_ticks):
        controller.decide(waiting(controller.window, in_flight=0))  # calm, not full
    assert controller.decide(waiting(controller.window)) == 2 * grown


def test_provider_push_back_shrinks_it_not_below_its_start() -> None:
    controller = WindowController(limits(), window=1024)
    assert controller.decide(waiting(1024, ended=100, pushed_back=20)) < 1024
    assert controller.reason == PUSHBACK
    for _ in range(30):
        controller.decide(waiting(controller.window, ended=100, pushed_back=20))
    assert controller.window == 256
    # A little push-back does not shrink it, but stops it growing.
    assert controller.decide(waiting(256, ended=100, pushed_back=1)) == 256


def test_memory_over_its_bound_cuts_below_the_start_down_to_the_floor_only() -> None:
    controller = WindowController(limits(memory_mb=450), window=2048)
    assert controller.decide(waiting(2048, rss_mb=470)) == int(2048 * 0.8)
    assert controller.reason == MEMORY
    # The heap is not given back: the same RSS does not cut again, nor lets it grow.
    assert controller.decide(waiting(1638, rss_mb=470)) == 1638
    # Rising further does; however high, never below the floor.
    rss = 470.0
    for _ in range(40):
        rss += 20
        controller.decide(waiting(controller.window, rss_mb=rss))
    assert controller.window == controller.limits.floor == 32


def test_growth_closes_in_on_where_memory_per_call_would_pass_the_bound() -> None:
    controller = WindowController(limits(memory_mb=450))
    controller.decide(waiting(0, rss_mb=300, in_flight=0))  # idle: 300 MB
    # 1000 calls in flight cost 100 MB: 0.1 MB each, 50 MB spare for 500 more: half of it.
    controller.window = 1000
    assert controller.decide(waiting(1000, rss_mb=400)) == 1250
    assert controller.reason == GROW
    # Calls just started look cheap: each is reckoned at least call_bytes (80 KiB).
    fresh = WindowController(limits(memory_mb=450), window=1000)
    fresh.decide(waiting(0, rss_mb=300, in_flight=0))
    assert fresh.decide(waiting(1000, rss_mb=320)) == 1000 + int(130 * 1024 / 80 / 2)
    # At the bound, no growth at all.
    assert fresh.decide(waiting(fresh.window, rss_mb=449.9)) == fresh.window


def test_never_above_the_ceiling_never_below_the_floor() -> None:
    small = WindowController(limits(ceiling=100, start=256))
    assert small.window == 100  # the start is capped by the ceiling
    for _ in range(5):
        assert small.decide(waiting(100)) == 100
    tiny = WindowController(limits(ceiling=8, start=8))
    assert tiny.limits.floor == 8
    assert tiny.decide(waiting(8, rss_mb=900)) == 8


def test_without_a_memory_figure_it_still_adapts() -> None:
    controller = WindowController(limits())
    seen = Observation(in_flight=256, cpu_share=0.1, loop_lag_s=0.0, rss_bytes=None, ended=10)
    assert controller.decide(seen) == 512


def test_what_counts_as_push_back() -> None:
    from jury.worker.tasks import Parked

    assert pushed_back(Parked("waiting for a rate-limit slot", 3.0)) == 1
    assert pushed_back(JudgmentFailed("429 after 4 attempts", kind="rate_limited")) == 1
    assert pushed_back(JudgmentFailed("timed out", kind="timeout")) == 0
    assert pushed_back(0.8) == 0
    assert pushed_back({"relevance": 1.0}) == 0


def test_celerys_own_pools_get_the_windows_start_not_the_ceiling() -> None:
    from jury.settings import Settings

    assert Settings(worker_pool="engine").pool_size == 4096
    assert Settings(worker_pool="threads").pool_size == 256
    assert Settings(worker_pool="prefork", worker_concurrency=4).pool_size == 4
