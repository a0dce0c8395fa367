"""Progress figures of a batch (done/total, succeeded/failed, judgments per second, ETA, cost),
as `jury submit --wait` and `jury status` show them. Pure: no I/O, no clock of its own."""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from jury.results.formats import cached_note
from jury.schemas.status import BatchStatus, StoredSamples

# The rate is measured over the last this-many seconds: long enough to smooth the bursts in
# which judgments are stored, short enough to follow a change of pace (a rate limit kicking
# in, workers added).
RATE_WINDOW_S = 20.0
# Below this much observed time the rate is not worth showing.
MIN_RATE_SPAN_S = 1.0


class RateMeter:
    """Judgments per second over a sliding window of (time, judgments done) observations."""

    def __init__(self, window_s: float = RATE_WINDOW_S) -> None:
        self.window_s = window_s
        self._points: deque[tuple[float, int]] = deque()

    def observe(self, t: float, done: int) -> None:
        if self._points and done < self._points[-1][1]:
            self._points.clear()  # counters went back (a resume reopened cells): start over
        self._points.append((t, done))
        # Keep one point at or before the window's start, so the span covers the window.
        while len(self._points) > 2 and self._points[1][0] <= t - self.window_s:
            self._points.popleft()

    def rate(self) -> float | None:
        if len(self._points) < 2:
            return None
        (t0, n0), (t1, n1) = self._points[0], self._points[-1]
        if t1 - t0 < MIN_RATE_SPAN_S:
            return None
        return (n1 - n0) / (t1 - t0)


def _aware(moment: datetime) -> datetime:
    # SQLite hands back naive datetimes; the store writes them in UTC.
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def elapsed_s(status: BatchStatus, now: datetime) -> float:
    end = _aware(status.finished_at) if status.finished_at else _aware(now)
    return max(0.0, (end - _aware(status.created_at)).total_seconds())


@dataclass(frozen=True)
class Progress:
    """One observation of a batch. `done` counts the judgments (samples) stored so far, failed
    ones included, whether their cell has its verdict yet or not."""

    batch_id: str
    name: str
    status: str
    done: int
    total: int
    succeeded: int
    failed: int
    verdicts: int
    cells: int
    flagged: int
    per_second: float | None
    eta_s: float | None
    cost_usd: float
    elapsed_s: float
    finished: bool
    error: str | None
    # Judgments answered from the result cache (no call made, nothing spent).
    cached: int = 0
    # Why the batch may not be moving (producer.diagnosis), while it is followed.
    warning: str | None = None

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total else (1.0 if self.finished else 0.0)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (`--json`): one object per observation, stable keys."""
        data = asdict(self)
        data["per_second"] = None if self.per_second is None else round(self.per_second, 3)
        data["eta_s"] = None if self.eta_s is None else round(self.eta_s, 1)
        data["elapsed_s"] = round(self.elapsed_s, 1)
        data["cost_usd"] = round(self.cost_usd, 6)
        data["fraction"] = round(self.fraction, 4)
        return data


def eta_s(remaining: int, per_second: float | None) -> float | None:
    if remaining <= 0:
        return 0.0
    if not per_second or per_second <= 0:
        return None
    return remaining / per_second


def measure(
    status: BatchStatus,
    now: datetime,
    per_second: float | None = None,
    stored: StoredSamples | None = None,
) -> Progress:
    """The batch's progress; without a measured rate, its average rate since submission.
    `stored` counts the samples stored so far (by default, those of finished cells)."""
    elapsed = elapsed_s(status, now)
    if stored is None:
        stored = StoredSamples(status.n_samples, status.n_failed_samples, status.cost_usd)
    done, total = stored.stored, status.n_samples_expected
    finished = status.status.finished
    # A running batch's first second is too short to rate; a finished batch's average is
    # exact however short it ran (a batch done in 0.4 s shows its rate, not `?`).
    if per_second is None and done and (elapsed >= MIN_RATE_SPAN_S or (finished and elapsed)):
        per_second = done / elapsed
    return Progress(
        batch_id=status.batch_id,
        name=status.name,
        status=status.status.value,
        done=done,
        total=total,
        succeeded=done - stored.failed,
        failed=stored.failed,
        verdicts=status.n_verdicts,
        cells=status.n_cells,
        flagged=status.n_flagged,
        per_second=per_second,
        eta_s=None if finished else eta_s(total - done, per_second),
        cost_usd=stored.cost_usd,
        elapsed_s=elapsed,
        finished=finished,
        error=status.error,
        cached=stored.cached,
    )


def format_duration(seconds: float | None) -> str:
    """`1:02:03`, `2:03`, `0:05`; `?` when unknown."""
    if seconds is None:
        return "?"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def format_rate(per_second: float | None) -> str:
    if per_second is None:
        return "? judgments/s"
    return (
        f"{per_second:,.1f} judgments/s" if per_second < 100 else f"{per_second:,.0f} judgments/s"
    )


def describe(progress: Progress) -> str:
    """One line of text: what the bar stands for, in figures."""
    eta = "done" if progress.finished else f"ETA {format_duration(progress.eta_s)}"
    return (
        f"{progress.done:,}/{progress.total:,} judgments ({progress.fraction:.0%}) · "
        f"{progress.succeeded:,} ok, {progress.failed:,} failed{cached_note(progress.cached)} · "
        f"{progress.verdicts:,}/{progress.cells:,} verdicts · "
        f"{format_rate(progress.per_second)} · {eta} · ${progress.cost_usd:.4f}"
    )
