"""Following a batch until it finishes, with a progress bar, and printing its verdicts."""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from sqlalchemy.orm import Session, sessionmaker

from producer.reporting import print_summary, verdict_table
from schemas.status import BatchStatus
from store.cells import iter_verdicts
from store.repository import batch_status, load_config

POLL_S = 0.5


def follow_batch(
    sessions: sessionmaker[Session],
    batch_id: str,
    console: Console,
    timeout: float | None = None,
) -> BatchStatus | None:
    """Poll the store until the batch is finished; None if `timeout` ran out first."""
    deadline = None if timeout is None else time.monotonic() + timeout
    status = batch_status(sessions, batch_id)
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("verdicts · {task.fields[samples]} samples ({task.fields[failed]} failed)"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        task = progress.add_task(status.name, total=status.n_cells or None, samples=0, failed=0)
        while True:
            progress.update(
                task,
                completed=status.n_verdicts,
                total=status.n_cells or None,
                samples=status.n_samples,
                failed=status.n_failed_samples,
            )
            if status.status.finished:
                return status
            if deadline is not None and time.monotonic() > deadline:
                return None
            time.sleep(POLL_S)
            status = batch_status(sessions, batch_id)


def print_verdicts(sessions: sessionmaker[Session], batch_id: str, console: Console) -> None:
    status = batch_status(sessions, batch_id)
    judges = [j.name for j in load_config(sessions, batch_id).panel]
    table, summary = verdict_table(
        iter_verdicts(sessions, batch_id), judges, f"{status.name} — verdicts"
    )
    console.print(table)
    print_summary(console, status, summary)
