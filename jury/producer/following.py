"""Following a batch until it finishes (a live progress bar, JSON lines, or nothing), and
printing its verdicts."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import IO, Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from jury.producer.diagnosis import WorkerWatch
from jury.producer.outages import FOLLOW_OUTAGE_LIMIT_S, Outage, ride_out
from jury.producer.progress import Progress, RateMeter, describe, measure
from jury.results.formats import print_summary, verdict_table
from jury.results.labelled import read_records
from jury.results.terminal import safe_text
from jury.schemas.batch import BatchConfig
from jury.schemas.outcome import failure_paragraph
from jury.schemas.status import BatchState, BatchStatus, StoredSamples
from jury.store.inspection import stored_samples
from jury.store.outcome import judge_failures
from jury.store.repository import batch_status, load_config
from jury.store.sql import Sessions

POLL_S = 0.5
# Stored samples are counted at most every this many times the count's own duration.
COUNT_COST_FACTOR = 20
ERRORS = Console(stderr=True, soft_wrap=True)
# In JSON mode a line is written when something changed, and at least this often.
JSON_HEARTBEAT_S = 5.0
# Without a terminal, the bar becomes a line of figures at most this often (and at the end).
LOG_INTERVAL_S = 10.0


class Display(StrEnum):
    BAR = "bar"  # a live progress bar on the console
    JSON = "json"  # one JSON object per line: the `jury status --json` object, refreshed
    QUIET = "quiet"  # nothing


def status_json(status: BatchStatus, progress: Progress) -> dict[str, Any]:
    """`jury status --json`: the stored status plus the progress figures."""
    return {**status.model_dump(mode="json"), **progress.as_dict()}


_STATE_STYLE = {"completed": "green", "degraded": "yellow"}


def render(progress: Progress) -> RenderableType:
    """The progress bar with its figures on one line (wrapped on a narrow terminal), and the
    diagnosis under it when there is one."""
    style = _STATE_STYLE.get(progress.status, "red") if progress.finished else "green"
    grid = Table.grid(padding=(0, 1))
    grid.add_row(
        safe_text(progress.name, "bold"),
        ProgressBar(
            total=max(progress.total, 1),
            completed=progress.done,
            width=30,
            complete_style=style,
            finished_style=style,
        ),
        Text(describe(progress), no_wrap=False),
        Text(progress.status, style=("bold " + style) if progress.finished else ""),
    )
    if progress.warning:
        return Group(grid, Text(f"warning: {progress.warning}", style="yellow"))
    return grid


class Observer:
    """Reads a batch's state and its stored samples. Counting the samples scans the batch's
    rows, so on a large batch it is done at most every COUNT_COST_FACTOR times its own
    duration (and at least every POLL_S); the state is a one-row read, done every time.
    Through an outage of the store (producer.outages) it gives its last look, saying so."""

    def __init__(
        self,
        sessions: Sessions,
        batch_id: str,
        watch: WorkerWatch | None = None,
        outage_limit_s: float = FOLLOW_OUTAGE_LIMIT_S,
    ) -> None:
        self.sessions, self.batch_id, self.watch = sessions, batch_id, watch
        self.meter = RateMeter()
        self.outages = Outage(batch_id, outage_limit_s)
        self._stored: StoredSamples | None = None
        self._next_count = 0.0
        self._config: BatchConfig | None = None  # read once: its judges and dimensions never change
        self._last: tuple[BatchStatus, Progress] | None = None

    def observe(self) -> tuple[BatchStatus, Progress] | None:
        """The batch now; during an outage, the last look with the outage as its warning
        (None before a first look)."""
        seen = self.outages.attempt(self._look)
        if seen is not None:
            self._last = seen
        elif self._last is not None:
            status, progress = self._last
            seen = (status, replace(progress, warning=self.outages.line))
        return seen

    def _look(self) -> tuple[BatchStatus, Progress]:
        status = batch_status(self.sessions, self.batch_id)
        now = time.monotonic()
        if self._stored is None or now >= self._next_count or status.status.finished:
            self._config = self._config or load_config(self.sessions, self.batch_id)
            self._stored = stored_samples(self.sessions, self.batch_id, self._config)
            took = time.monotonic() - now
            self._next_count = now + max(POLL_S, COUNT_COST_FACTOR * took)
            self.meter.observe(now, self._stored.stored)
        progress = measure(status, datetime.now(UTC), self.meter.rate(), self._stored)
        if self.watch is not None and not status.status.finished:
            progress = replace(progress, warning=self.watch.message())
        return status, progress


def follow_batch(
    sessions: Sessions,
    batch_id: str,
    console: Console,
    timeout: float | None = None,
    display: Display = Display.BAR,
    out: IO[str] | None = None,
    watch: WorkerWatch | None = None,
    outage_limit_s: float = FOLLOW_OUTAGE_LIMIT_S,
) -> BatchStatus | None:
    """Poll the store until the batch is finished; None if `timeout` ran out first.

    The bar is live on a terminal; elsewhere (a log, `docker compose logs`) it becomes a line
    of figures when they change, at most every LOG_INTERVAL_S, and at the end. `out` receives
    the JSON lines (default: the console's file). With a `watch`, a diagnosis (no live
    worker, workers on another database) is shown under the bar, in the JSON objects'
    `warning`, and on stderr otherwise. An outage of the store is such a warning too, in one
    line while it lasts (producer.outages); one longer than `outage_limit_s` raises
    FollowingLost."""
    observer = Observer(sessions, batch_id, watch.start() if watch else None, outage_limit_s)
    try:
        with _ctrl_c_remembered() as interrupted:
            return _follow(observer, console, timeout, display, out, interrupted)
    finally:
        if watch is not None:
            watch.stop()


@contextmanager
def _ctrl_c_remembered() -> Iterator[threading.Event]:
    """Ctrl-C raises KeyboardInterrupt wherever the main thread is; raised inside a finalizer
    (a collected connection's `__del__`) Python prints and drops it, and following went on
    after the user's one Ctrl-C (seen once in the suite). The event it also sets is checked
    at every poll, so one Ctrl-C always stops following."""
    interrupted = threading.Event()

    def remember(signum: int, frame: object) -> None:
        interrupted.set()
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGINT, remember)
    except ValueError:  # not the main thread (the Python API): no handler of ours
        yield interrupted
        return
    try:
        yield interrupted
    finally:
        signal.signal(signal.SIGINT, previous)


def _pause(interrupted: threading.Event) -> None:
    if interrupted.wait(POLL_S):
        raise KeyboardInterrupt


def _follow(
    observer: Observer,
    console: Console,
    timeout: float | None,
    display: Display,
    out: IO[str] | None,
    interrupted: threading.Event,
) -> BatchStatus | None:
    deadline = None if timeout is None else time.monotonic() + timeout
    said: str | None = None
    while (seen := observer.observe()) is None:  # the store is away before the first look
        if observer.outages.line != said:
            said = observer.outages.line
            ERRORS.print(f"warning: {said}", markup=False, highlight=False)
        if _past(deadline):
            return None
        _pause(interrupted)
    status, progress = seen
    if display == Display.BAR and console.is_terminal:
        with Live(render(progress), console=console, refresh_per_second=4) as live:
            while not status.status.finished and not _past(deadline):
                _pause(interrupted)
                status, progress = observer.observe() or (status, progress)
                live.update(render(progress))
        return status if status.status.finished else None
    interval = JSON_HEARTBEAT_S if display == Display.JSON else LOG_INTERVAL_S
    last_key: tuple[object, ...] | None = None
    last_write = -interval
    warned = said
    while True:
        ended = status.status.finished or _past(deadline)
        key = (progress.status, progress.done, progress.verdicts, progress.failed)
        now = time.monotonic()
        due = now - last_write >= interval
        if display == Display.JSON and (key != last_key or due or progress.warning != warned):
            stream = out or console.file
            stream.write(json.dumps(status_json(status, progress)) + "\n")
            stream.flush()
            last_key, last_write = key, now
        elif display == Display.BAR and ((key != last_key and due) or ended):
            console.print(
                safe_text(f"{progress.name}: {describe(progress)} · {progress.status}"),
                highlight=False,
            )
            last_key, last_write = key, now
        if progress.warning and progress.warning != warned:
            ERRORS.print(f"warning: {progress.warning}", markup=False, highlight=False)
        warned = progress.warning
        if ended:
            break
        _pause(interrupted)
        status, progress = observer.observe() or (status, progress)
    return status if status.status.finished else None


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() > deadline


def snapshot(sessions: Sessions, batch_id: str) -> tuple[BatchStatus, Progress]:
    """The batch now, with its average rate since submission (one look, no rate window)."""
    status = batch_status(sessions, batch_id)
    return status, measure(status, datetime.now(UTC), None, stored_samples(sessions, batch_id))


def print_progress(sessions: Sessions, batch_id: str, console: Console) -> Progress:
    """One snapshot (`jury status`): the bar at the batch's average rate so far, and, once it
    has finished, how it ended."""
    status, progress = snapshot(sessions, batch_id)
    console.print(render(progress))
    if status.status.finished:
        print_outcome(sessions, status, console)
    elif status.error:
        console.print(Text.assemble(("error: ", "red"), safe_text(status.error, multiline=True)))
    return progress


def _said_on_stderr(line: str) -> None:
    ERRORS.print(f"warning: {line}", markup=False, highlight=False)


def print_outcome(sessions: Sessions, status: BatchStatus, console: Console) -> None:
    """How a finished batch ended, and one paragraph per judge that failed (read through an
    outage of the store, as following is)."""
    failures = ride_out(
        lambda: judge_failures(sessions, status.batch_id, load_config(sessions, status.batch_id)),
        Outage(status.batch_id),
        _said_on_stderr,
    )
    style = _STATE_STYLE.get(status.status.value, "red")
    meaning = {
        BatchState.DEGRADED: ": some judgments failed (below); its verdicts rest on the judges "
        "that answered",
        BatchState.COMPLETED: "; a few judgments failed (below)",
    }.get(status.status, f": {status.error}" if status.error else "")
    if status.status != BatchState.COMPLETED or failures:
        console.print(
            Text.assemble(
                (f"batch {status.batch_id} {status.status.value}", f"bold {style}"),
                safe_text(meaning, multiline=True),
            )
        )
    for failure in failures:
        console.print(Text(failure_paragraph(failure, status.batch_id)), style=style)


def interrupted(batch_id: str) -> str:
    """What Ctrl-C while following a batch means."""
    return (
        f"stopped following batch {batch_id}; the batch goes on (the workers keep judging "
        f"it). Follow it again with `jury status {batch_id} --watch`, see its results with "
        f"`jury results {batch_id}`, or stop it with `jury cancel {batch_id}`."
    )


def print_verdicts(sessions: Sessions, batch_id: str, console: Console) -> None:
    status, config = ride_out(
        lambda: (batch_status(sessions, batch_id), load_config(sessions, batch_id)),
        Outage(batch_id),
        _said_on_stderr,
    )
    judges = [j.name for j in config.panel]
    records = read_records(sessions, batch_id, config)
    title = safe_text(f"{status.name} — verdicts")
    table, summary = verdict_table(records, judges, title, console)
    console.print(table)
    print_summary(console, status, summary, stored_samples(sessions, batch_id).cached)
