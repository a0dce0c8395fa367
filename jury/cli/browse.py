"""`jury list`, `show` and `report`: reading what batches produced."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from pydantic import ValidationError
from rich import box
from rich.table import Table
from rich.text import Text

from jury.cli.common import fail, load_settings, user_errors
from jury.errors import UnknownBatchError
from jury.producer.progress import measure
from jury.results.formats import make_console
from jury.results.samples import print_item
from jury.store.engine import session_factory
from jury.store.inspection import item_samples, item_verdicts, recent_batches
from jury.store.repository import load_config, load_item


@click.command(name="list")
@click.option("--limit", "-n", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per batch, per line.")
@user_errors
def list_batches(limit: int, as_json: bool) -> None:
    """Recent batches, newest first: id, name, state, progress, cost and when it started."""
    from datetime import UTC, datetime

    sessions = session_factory(load_settings().database_url)
    batches = recent_batches(sessions, limit)
    if as_json:
        for status in batches:
            click.echo(json.dumps(status.model_dump(mode="json")))
        return
    console = make_console()
    if not batches:
        console.print("no batch in this database yet: `jury submit FILE` starts one")
        return
    table = Table(box=box.SIMPLE_HEAD, header_style="bold")
    for column in ("batch", "name", "state", "progress", "cost", "started (UTC)"):
        table.add_column(column, justify="right" if column in ("cost", "progress") else "left")
    now = datetime.now(UTC)
    for status in batches:
        progress = measure(status, now)
        table.add_row(
            Text(status.batch_id),
            Text(status.name, overflow="ellipsis"),
            Text(status.status.value, style=_STATE_STYLE.get(status.status.value, "")),
            f"{status.n_verdicts:,}/{status.n_cells:,} ({progress.fraction:.0%})",
            f"${status.cost_usd:.4f}",
            f"{status.created_at:%Y-%m-%d %H:%M:%S}",
        )
    console.print(table)


_STATE_STYLE = {
    "completed": "green",
    "degraded": "yellow",
    "failed": "red",
    "cancelled": "red",
    "stopped": "red",
}


@click.command()
@click.argument("batch_id")
@click.argument("item_id")
@click.option("--dimension", "-d", help="Only this dimension.")
@user_errors
def show(batch_id: str, item_id: str, dimension: str | None) -> None:
    """Every judgment of one item: per dimension its verdict, then each sample's judge, score,
    reasoning, latency, tokens, cost, whether it was cached, and its error."""
    sessions = session_factory(load_settings().database_url)
    config = load_config(sessions, batch_id)
    if dimension is not None and dimension not in [d.name for d in config.dimensions]:
        known = ", ".join(d.name for d in config.dimensions)
        fail(f"batch {batch_id} has no dimension {dimension!r}; its dimensions: {known}")
    try:
        item = load_item(sessions, batch_id, item_id)
    except UnknownBatchError:
        fail(f"batch {batch_id} has no item {item_id!r}; `jury results {batch_id}` lists its items")
    except ValidationError:  # stored without an output: a batch's candidates write it
        fail(
            f"item {item_id!r} of batch {batch_id} has no output yet: the batch's candidates "
            f"have not all answered its input (`jury status {batch_id}`)"
        )
    dimensions = [dimension] if dimension else [d.name for d in config.dimensions]
    verdicts = item_verdicts(sessions, batch_id, item_id)
    samples = item_samples(sessions, batch_id, item_id, dimension)
    print_item(make_console(), item, dimensions, verdicts, samples)


@click.command()
@click.argument("batch_id")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the page here (default: report-BATCH_ID.html; `-`: standard output).",
)
@user_errors
def report(batch_id: str, output: Path | None) -> None:
    """Write a self-contained HTML report: how the batch ended, score distributions,
    per-judge scores, judge agreement, the flagged records to review first, and every
    record with its judges' reasoning."""
    from jury.results.html.report import build_report, write_report

    sessions = session_factory(load_settings().database_url)
    if str(output) == "-":
        sys.stdout.write(build_report(sessions, batch_id))
        return
    output = output or Path(f"report-{batch_id}.html")
    size = write_report(sessions, batch_id, output)
    click.echo(f"wrote {output} ({size / 1024:.0f} KiB)")
