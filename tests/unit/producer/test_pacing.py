"""The producer's publication pace (jury.producer.pacing): a pure schedule, on a fake clock."""

from __future__ import annotations

from typing import Any

import pytest

from jury.producer.pacing import PublicationPace
from jury.schemas.batch import BatchConfig


def config(*judges: dict[str, Any], **extra: Any) -> BatchConfig:
    return BatchConfig.model_validate(
        {
            "judges": list(judges),
            "dimensions": ["relevance"],
            **extra,
        }
    )


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_tasks_beyond_the_horizon_are_parked_until_half_a_horizon_before_their_slot() -> None:
    clock = Clock()
    pace = PublicationPace(
        config({"model": "openai/fast", "rpm": 600}), horizon_s=6, margin=0, clock=clock
    )
    name = pace_name(pace)
    delays = [pace.delay_s(name) for _ in range(100)]
    # 600 rpm: a slot every 0.1 s; the first 6 s of slots (tasks 0..60) are queued at once.
    assert delays[:61] == [0.0] * 61
    assert delays[61] == pytest.approx(6.1 - 3)
    assert delays[99] == pytest.approx(9.9 - 3)
    # Time passes between waves: the schedule keeps the batch's start, not the wave's.
    clock.now += 2
    assert pace.delay_s(name) == pytest.approx(10.0 - 2 - 3)
    clock.now += 3
    assert pace.delay_s(name) == 0.0  # its slot (10.1 s) is within the horizon now


def test_only_judges_limited_by_rpm_through_the_limiter_are_paced() -> None:
    pace = PublicationPace(
        config(
            {"model": "openai/free"},
            {"model": "openai/tokens", "tpm": 1000},
            {"model": "openai/batched", "rpm": 1, "batch_api": True},
            {"model": "openai/slow", "rpm": 60},
        ),
        horizon_s=6,
        margin=0.02,
        clock=Clock(),
    )
    assert sorted(pace.intervals) == ["openai/slow"]
    assert pace.intervals["openai/slow"] == pytest.approx(1.02)
    unpaced = ["openai/free", "openai/tokens", "openai/batched"]
    assert all(pace.delay_s(judge) == 0.0 for judge in unpaced * 50)


def test_a_pair_s_two_orders_take_two_slots() -> None:
    pairwise = config({"model": "openai/fast", "rpm": 600}, pairwise={"tie_tolerance": 0.5})
    pace = PublicationPace(pairwise, horizon_s=6, margin=0, clock=Clock())
    assert pace.intervals["openai/fast"] == pytest.approx(0.2)


def pace_name(pace: PublicationPace) -> str:
    (name,) = pace.intervals
    return name


def test_a_task_that_would_wait_beyond_the_batch_s_bound_is_queued_for_its_worker_to_fail() -> None:
    bounded = config({"model": "openai/fast", "rpm": 600}, max_wait_s=4)
    pace = PublicationPace(bounded, horizon_s=6, margin=0, clock=Clock())
    delays = [pace.delay_s("openai/fast") for _ in range(100)]
    # Parked up to 4 s (slots up to 7 s away); later ones are queued, to fail as `wait_limit`.
    assert delays[61:71] == pytest.approx([slot / 10 - 3 for slot in range(61, 71)])
    assert delays[71:] == [0.0] * 29
