"""Following a batch until it finishes (a live progress bar, JSON lines, or nothing), and
printing its verdicts."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from enum import StrEnum
from typing import IO, Any

from rich.console import Console, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text
from sqlalchemy.orm import Session, sessionmaker

from producer.progress import Progress, RateMeter, describe, measure
from producer.reporting import print_summary, verdict_table
from schemas.status import BatchStatus
from store.cells import iter_verdicts
from store.repository import batch_status, load_config

POLL_S = 0.5
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


def render(progress: Progress) -> RenderableType:
    """The progress bar with its figures on one line (wrapped on a narrow terminal)."""
    style = "red" if progress.finished and progress.status != "completed" else "green"
    grid = Table.grid(padding=(0, 1))
    grid.add_row(
        Text(progress.name, style="bold"),
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
    return grid


def follow_batch(
    sessions: sessionmaker[Session],
    batch_id: str,
    console: Console,
    timeout: float | None = None,
    display: Display = Display.BAR,
    out: IO[str] | None = None,
) -> BatchStatus | None:
    """Poll the store until the batch is finished; None if `timeout` ran out first.

    The bar is live on a terminal; elsewhere (a log, `docker compose logs`) it becomes a line
    of figures when they change, at most every LOG_INTERVAL_S, and at the end. `out` receives
    the JSON lines (default: the console's file)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    meter = RateMeter()

    def observe() -> tuple[BatchStatus, Progress]:
        status = batch_status(sessions, batch_id)
        meter.observe(time.monotonic(), status.n_samples)
        return status, measure(status, datetime.now(UTC), meter.rate())

    status, progress = observe()
    if display == Display.BAR and console.is_terminal:
        with Live(render(progress), console=console, refresh_per_second=4) as live:
            while not status.status.finished and not _past(deadline):
                time.sleep(POLL_S)
                status, progress = observe()
                live.update(render(progress))
        return status if status.status.finished else None
    interval = JSON_HEARTBEAT_S if display == Display.JSON else LOG_INTERVAL_S
    last_key: tuple[object, ...] | None = None
    last_write = -interval
    while True:
        ended = status.status.finished or _past(deadline)
        key = (progress.status, progress.done, progress.verdicts, progress.failed)
        now = time.monotonic()
        due = now - last_write >= interval
        if display == Display.JSON and (key != last_key or due):
            stream = out or console.file
            stream.write(json.dumps(status_json(status, progress)) + "\n")
            stream.flush()
            last_key, last_write = key, now
        elif display == Display.BAR and ((key != last_key and due) or ended):
            console.print(
                f"{progress.name}: {describe(progress)} · {progress.status}",
                markup=False,
                highlight=False,
            )
            last_key, last_write = key, now
        if ended:
            break
        time.sleep(POLL_S)
        status, progress = observe()
    return status if status.status.finished else None


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() > deadline


def snapshot(sessions: sessionmaker[Session], batch_id: str) -> tuple[BatchStatus, Progress]:
    """The batch now, with its average rate since submission (one look, no rate window)."""
    status = batch_status(sessions, batch_id)
    return status, measure(status, datetime.now(UTC))


def print_progress(sessions: sessionmaker[Session], batch_id: str, console: Console) -> Progress:
    """One snapshot (`jury status`): the bar at the batch's average rate so far."""
    status, progress = snapshot(sessions, batch_id)
    console.print(render(progress))
    if status.error:
        console.print(f"[red]error:[/] {status.error}", highlight=False)
    return progress


def print_verdicts(sessions: sessionmaker[Session], batch_id: str, console: Console) -> None:
    status = batch_status(sessions, batch_id)
    judges = [j.name for j in load_config(sessions, batch_id).panel]
    table, summary = verdict_table(
        iter_verdicts(sessions, batch_id), judges, f"{status.name} — verdicts"
    )
    console.print(table)
    print_summary(console, status, summary)
