"""Progress figures: rate over a sliding window, ETA, the JSON form and the one-line text."""

from __future__ import annotations

import contextlib
import signal
from datetime import UTC, datetime, timedelta

import pytest

from jury.producer.following import _ctrl_c_remembered, _pause
from jury.producer.progress import (
    RateMeter,
    describe,
    eta_s,
    format_duration,
    format_rate,
    measure,
)
from jury.schemas.status import BatchState, BatchStatus, StoredSamples

START = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def status(**changes: object) -> BatchStatus:
    fields: dict[str, object] = {
        "batch_id": "b1",
        "name": "demo",
        "status": BatchState.RUNNING,
        "n_items": 10,
        "n_cells": 20,
        "n_samples_expected": 120,
        "n_verdicts": 5,
        "n_samples": 30,
        "n_failed_samples": 2,
        "n_flagged": 1,
        "cost_usd": 0.0125,
        "error": None,
        "created_at": START,
        "finished_at": None,
    }
    return BatchStatus.model_validate({**fields, **changes})


def test_rate_is_measured_over_the_window_only() -> None:
    meter = RateMeter(window_s=10)
    assert meter.rate() is None
    meter.observe(0.0, 0)
    meter.observe(0.5, 100)
    assert meter.rate() is None  # half a second says nothing yet
    for t in range(1, 31):
        # 100/s for the first 20 s, then 10/s
        meter.observe(float(t), 100 * min(t, 20) + 10 * max(0, t - 20))
    assert meter.rate() == pytest.approx(10.0, rel=0.15)


def test_rate_starts_over_when_the_count_goes_back() -> None:
    meter = RateMeter(window_s=10)
    meter.observe(0.0, 500)
    meter.observe(5.0, 600)
    meter.observe(6.0, 10)  # a resume reopened cells: counters were recomputed lower
    assert meter.rate() is None
    meter.observe(8.0, 30)
    assert meter.rate() == pytest.approx(10.0)


def test_eta() -> None:
    assert eta_s(100, 10.0) == 10.0
    assert eta_s(0, None) == 0.0
    assert eta_s(100, None) is None
    assert eta_s(100, 0.0) is None


def test_measure_uses_the_average_rate_without_a_window() -> None:
    progress = measure(status(), START + timedelta(seconds=60))
    assert progress.per_second == pytest.approx(0.5)  # 30 judgments in 60 s
    assert progress.eta_s == pytest.approx(180.0)  # 90 more at 0.5/s
    assert (progress.done, progress.total, progress.succeeded, progress.failed) == (30, 120, 28, 2)
    assert progress.fraction == pytest.approx(0.25)
    assert not progress.finished


def test_measure_prefers_the_measured_rate_and_reads_naive_times_as_utc() -> None:
    naive = status(created_at=START.replace(tzinfo=None))
    progress = measure(naive, START + timedelta(seconds=10), per_second=9.0)
    assert progress.elapsed_s == pytest.approx(10.0)
    assert progress.eta_s == pytest.approx(10.0)


def test_a_finished_batch_has_no_eta_and_stops_its_clock() -> None:
    done = status(
        status=BatchState.COMPLETED,
        n_samples=120,
        n_verdicts=20,
        finished_at=START + timedelta(seconds=40),
    )
    progress = measure(done, START + timedelta(hours=5))
    assert progress.elapsed_s == pytest.approx(40.0)
    assert progress.per_second == pytest.approx(3.0)
    assert progress.eta_s is None and progress.finished and progress.fraction == 1.0


def test_a_batch_finished_within_a_second_shows_its_average_rate() -> None:
    done = status(
        status=BatchState.COMPLETED,
        n_samples=120,
        n_verdicts=20,
        finished_at=START + timedelta(milliseconds=400),
    )
    progress = measure(done, START + timedelta(seconds=3))
    assert progress.per_second == pytest.approx(300.0)  # 120 judgments in 0.4 s
    assert "300 judgments/s" in describe(progress)
    # Still running after 0.4 s: too early to rate.
    assert measure(status(), START + timedelta(milliseconds=400)).per_second is None


def test_judgments_from_the_cache_are_told() -> None:
    stored = StoredSamples(stored=120, failed=0, cost_usd=0.0, cached=120)
    done = status(status=BatchState.COMPLETED, n_samples=120, finished_at=START)
    progress = measure(done, START, stored=stored)
    assert progress.cached == 120 and progress.as_dict()["cached"] == 120
    assert "120 ok, 0 failed, 120 from the cache · " in describe(progress)
    assert "cache" not in describe(measure(status(), START + timedelta(seconds=60)))


def test_json_form_has_stable_keys_and_rounded_figures() -> None:
    data = measure(status(), START + timedelta(seconds=7)).as_dict()
    assert set(data) == {
        "batch_id",
        "name",
        "status",
        "done",
        "total",
        "succeeded",
        "failed",
        "verdicts",
        "cells",
        "flagged",
        "per_second",
        "eta_s",
        "cost_usd",
        "elapsed_s",
        "finished",
        "error",
        "fraction",
        "warning",
        "cached",
    }
    assert data["status"] == "running" and data["per_second"] == pytest.approx(4.286)


def test_progress_counts_samples_as_they_are_stored() -> None:
    # 30 samples in finished cells, but 75 stored (failed ones included) in all.
    stored = StoredSamples(stored=75, failed=5, cost_usd=0.05)
    progress = measure(status(), START + timedelta(seconds=15), stored=stored)
    assert (progress.done, progress.succeeded, progress.failed) == (75, 70, 5)
    assert progress.cost_usd == 0.05 and progress.per_second == pytest.approx(5.0)
    assert progress.eta_s == pytest.approx(9.0)  # 45 left at 5 a second


def test_one_line_description() -> None:
    text = describe(measure(status(), START + timedelta(seconds=60)))
    assert text == (
        "30/120 judgments (25%) · 28 ok, 2 failed · 5/20 verdicts · 0.5 judgments/s · "
        "ETA 3:00 · $0.0125"
    )


def test_formats() -> None:
    assert format_duration(None) == "?"
    assert format_duration(5) == "0:05"
    assert format_duration(3723) == "1:02:03"
    assert format_rate(1234.4) == "1,234 judgments/s"
    assert format_rate(None) == "? judgments/s"


def test_one_ctrl_c_stops_following_even_when_python_drops_it() -> None:
    """Ctrl-C raised inside a finalizer is printed and dropped by Python: following must stop
    at the next poll all the same, and the previous SIGINT handler comes back after."""
    before = signal.getsignal(signal.SIGINT)
    with _ctrl_c_remembered() as interrupted:
        on_ctrl_c = signal.getsignal(signal.SIGINT)
        assert callable(on_ctrl_c)
        with contextlib.suppress(KeyboardInterrupt):  # where Python would drop it
            on_ctrl_c(signal.SIGINT, None)
        with pytest.raises(KeyboardInterrupt):
            _pause(interrupted)
    assert signal.getsignal(signal.SIGINT) is before
