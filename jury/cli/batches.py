"""`jury submit`, `status`, `results`, `cancel` and `resume`: running batches."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import IO

import click
from rich.console import Console
from rich.text import Text

from jury._version import runtime_versions
from jury.api import Batch, PreparedBatch, attach, new_batch_id, prepare
from jury.broker.census import WorkerWindow, worker_windows
from jury.broker.redis_client import BrokerRedis
from jury.cli.common import (
    FAIL_ON_DEGRADED,
    display_mode,
    errors_console,
    fail,
    follow_to_end,
    user_errors,
)
from jury.errors import JuryError
from jury.producer.following import Display, print_progress, print_verdicts, snapshot, status_json
from jury.results.csv_records import write_csv
from jury.results.formats import FORMATS, make_console, write_json, write_jsonl
from jury.results.plan_table import print_plan
from jury.results.provider_batches import print_provider_batches, provider_batches_json
from jury.results.samples import SAMPLE_FORMATS, write_samples
from jury.schemas.identifiers import batch_id_problem


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--wait", is_flag=True, help="Follow progress until the batch finishes.")
@click.option("--batch-id", help="Use this id instead of a generated one.")
@click.option("--dry-run", is_flag=True, help="Validate and print the plan; enqueue nothing.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    metavar="N",
    help="Judge only the first N items (to try a batch before paying for all of it).",
)
@click.option(
    "--sample",
    type=click.IntRange(min=1),
    metavar="N",
    help="Judge a random sample of N items, the same for the same --seed (file order kept).",
)
@click.option("--seed", type=int, metavar="S", help="With --sample: the sample's seed (default 0).")
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="PATH=VALUE",
    help="Change the batch file's setting at a dotted PATH (`judges.0.n=5`, "
    "`aggregation.across_models=median`), VALUE read as YAML; repeatable.",
)
@click.option("--temperature", type=click.FloatRange(0, 2), help="Every judge's temperature.")
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    metavar="N",
    help="Every judge's max_in_flight: its calls in flight at once, cluster-wide.",
)
@click.option("--model", help="Every judge's model (a one-judge panel, as a rule).")
@click.option("--timeout", type=float, help="With --wait: give up after this many seconds.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print JSON: the plan with --dry-run; progress, one object per line, with --wait.",
)
@click.option("--quiet", "-q", is_flag=True, help="Print only the batch id (and errors).")
@FAIL_ON_DEGRADED
@user_errors
def submit(
    file: Path,
    wait: bool,
    batch_id: str | None,
    dry_run: bool,
    limit: int | None,
    sample: int | None,
    seed: int | None,
    sets: tuple[str, ...],
    temperature: float | None,
    concurrency: int | None,
    model: str | None,
    timeout: float | None,
    as_json: bool,
    quiet: bool,
    fail_on_degraded: bool,
) -> None:
    """Validate FILE, record it and enqueue one task per (item, dimension, judge, sample).

    The batch id comes first and, alone, on the last line. With --wait, exit 0 when the batch
    completed (or ended degraded, unless --fail-on-degraded: then 4), 1 when it failed or was
    cancelled, 3 at --timeout; Ctrl-C stops following, not the batch."""
    if batch_id is not None and (problem := batch_id_problem(batch_id)):
        fail(f"--batch-id: {problem}; nothing was enqueued")
    if seed is not None and sample is None:
        fail("--seed goes with --sample N (the seed of the sample); nothing was enqueued")
    if sample is not None and limit is not None:
        fail("--sample and --limit both choose the items: give one; nothing was enqueued")
    console = make_console()
    with prepare(
        file,
        limit=limit,
        sample=sample,
        seed=seed or 0,
        overrides=sets,
        temperature=temperature,
        concurrency=concurrency,
        model=model,
    ) as prepared:
        if dry_run:
            if as_json:
                click.echo(json.dumps(prepared.plan().as_dict()))
            else:
                print_plan(console, prepared.config.name, prepared.plan())
            return
        display = display_mode(quiet, as_json)
        batch_id = batch_id or new_batch_id()

        def announce(batch_id: str) -> None:
            opening = Text(_opening(prepared, batch_id))
            if display == Display.BAR:
                console.print(opening, highlight=False)
            elif display == Display.JSON:
                errors_console().print(opening, highlight=False)

        try:
            batch = prepared.submit(batch_id, on_start=announce)
        except KeyboardInterrupt:
            fail(
                f"submission of batch {batch_id} interrupted: what was queued will be judged; "
                f"`jury resume {batch_id}` queues the rest, `jury cancel {batch_id}` drops it all",
                code=130,
            )
    code = 0
    if wait:
        code = follow_to_end(batch, console, timeout, display, fail_on_degraded, True)
    elif display == Display.BAR:
        console.print(
            f"queued; follow it with `jury status {batch_id} --watch`",
            markup=False,
            highlight=False,
        )
    click.echo(batch_id)
    sys.exit(code)


def _opening(prepared: PreparedBatch, batch_id: str) -> str:
    """The first line of `jury submit`: the id and what is to be judged."""
    config = prepared.config
    if config.per_item_dimensions:
        return (
            f"batch {batch_id}: {prepared.n_items} items, {prepared.n_cells} (item, "
            f"dimension) cells by each item's criteria × {config.samples_per_cell} samples"
        )
    return (
        f"batch {batch_id}: {prepared.n_items} items × {len(config.dimensions)} dimensions × "
        f"{config.samples_per_cell} samples"
    )


@click.command()
@click.argument("batch_id")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.option("--watch", "-w", is_flag=True, help="Follow progress until the batch finishes.")
@click.option("--timeout", type=float, help="With --watch: give up after this many seconds.")
@click.option("--quiet", "-q", is_flag=True, help="With --watch: print nothing, just wait.")
@FAIL_ON_DEGRADED
@user_errors
def status(
    batch_id: str,
    as_json: bool,
    watch: bool,
    timeout: float | None,
    quiet: bool,
    fail_on_degraded: bool,
) -> None:
    """Show a batch's progress: judgments stored, failed, rate, ETA and cost so far, and how
    it ended (completed, degraded or failed, with a paragraph per failing judge); and, for
    judges with `batch_api`, each provider batch (state, requests, done, failed, age).

    With --watch, follow it live until it finishes (exit codes as `submit --wait`); with
    --json, one JSON object (per line, with --watch)."""
    batch = attach(batch_id)
    if watch:
        display = display_mode(quiet, as_json)
        sys.exit(follow_to_end(batch, make_console(), timeout, display, fail_on_degraded))
    if as_json:
        # The versions that answer, so that a bug report says what ran.
        record = {
            **status_json(*snapshot(batch.sessions, batch_id)),
            "versions": runtime_versions(),
        }
        record["provider_batches"] = provider_batches_json(batch.sessions, batch_id)
        windows = _windows(batch)
        record["workers"] = None if windows is None else [vars(w) for w in windows]
        click.echo(json.dumps(record))
        return
    console = make_console()
    progress = print_progress(batch.sessions, batch_id, console)
    if not progress.finished and (line := windows_line(_windows(batch))):
        console.print(line, markup=False, highlight=False)
    print_provider_batches(batch.sessions, batch_id, console)


def _windows(batch: Batch) -> list[WorkerWindow] | None:
    """The live workers' windows, as their heartbeats published them; None when Redis cannot
    be asked (the status is the store's: it is shown anyway)."""
    try:
        broker = BrokerRedis.from_settings(batch.settings, socket_timeout=2)
    except JuryError:
        return None
    try:
        return worker_windows(broker, batch.settings)
    except Exception:
        return None
    finally:
        broker.close()


def windows_line(windows: list[WorkerWindow] | None) -> str | None:
    """`workers: 2 alive, windows 2,048 and 1,536 of 4,096, 3,410 tasks in flight`."""
    if not windows:  # Redis not asked, or no live worker (`jury status --watch` says so)
        return None
    sizes = [f"{w.window:,}" for w in windows]
    listed = sizes[0] if len(sizes) == 1 else ", ".join(sizes[:-1]) + " and " + sizes[-1]
    ceilings = sorted({f"{w.ceiling:,}" for w in windows})
    in_flight = sum(w.in_flight for w in windows)
    return (
        f"workers: {len(windows)} alive, window{'s' if len(windows) > 1 else ''} {listed} "
        f"of {' / '.join(ceilings)}, {in_flight:,} tasks in flight"
    )


@click.command()
@click.argument("batch_id")
@click.option(
    "--format", "fmt", type=click.Choice(FORMATS), help="Default: table; csv with --samples."
)
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), help="Write here.")
@click.option(
    "--samples",
    is_flag=True,
    help="One row per judgment (judge, score, reasoning, latency, tokens, cost, error) "
    "instead of one per verdict; csv (the default), json or jsonl.",
)
@user_errors
def results(batch_id: str, fmt: str | None, output: Path | None, samples: bool) -> None:
    """Print a batch's result records (one per item and dimension): those stored so far,
    while it runs."""
    fmt = fmt or ("csv" if samples else "table")
    batch = attach(batch_id)
    if samples and fmt not in SAMPLE_FORMATS:
        fail(
            "--samples writes json, jsonl or csv (`--format json`); to read one item's "
            f"judgments in the terminal, `jury show {batch_id} ITEM`"
        )
    if fmt == "table":
        if output is None:
            print_verdicts(batch.sessions, batch_id, make_console())
            return
        with _open(output) as table_file:  # closed, so the table is complete on disk
            print_verdicts(batch.sessions, batch_id, Console(file=table_file, width=200))
        return
    out = _open(output) if output else sys.stdout
    try:
        _write_results(out, fmt, batch, samples)
    finally:
        if output:
            out.close()


def _write_results(out: IO[str], fmt: str, batch: Batch, samples: bool) -> None:
    if samples:
        write_samples(out, fmt, batch.status(), batch.samples())
        return
    config = batch.config()
    if fmt == "json":
        write_json(out, batch.status(), batch.records())
    elif fmt == "jsonl":
        write_jsonl(out, batch.records())
    else:
        write_csv(
            out,
            batch.records(),
            [j.name for j in config.panel],
            pairwise=config.pairwise is not None,
            labelled=config.has_labels,
            calibrated=config.resolved_calibration is not None,
            methods=config.aggregation.reported_methods,
            uncertainty=config.aggregation.report_uncertainty,
            pass_vote=config.pass_vote,
        )


def _open(path: Path) -> IO[str]:
    try:
        return path.open("w", newline="", encoding="utf-8")
    except OSError as exc:
        raise JuryError(f"cannot write {path}: {exc.strerror or exc}") from None


@click.command()
@click.argument("batch_id")
@user_errors
def cancel(batch_id: str) -> None:
    """Stop a batch: workers skip its queued tasks, its tasks parked for a rate-limit slot
    are dropped, and its open provider batches (judges with `batch_api`) are cancelled at
    the workers' next poll; what was stored stays."""
    cancelled = attach(batch_id).cancel()
    click.echo(f"{batch_id}: {cancelled.state.value}")
    if cancelled.parked_dropped:
        click.echo(f"{cancelled.parked_dropped} tasks waiting for a rate-limit slot dropped")
    if cancelled.open_provider_batches:
        click.echo(
            f"{cancelled.open_provider_batches} open provider batches: the workers cancel them "
            "at their next poll"
        )


@click.command()
@click.argument("batch_id")
@click.option("--missing-only", is_flag=True, help="Only samples with no result, not failed ones.")
@click.option("--wait", is_flag=True, help="Follow progress until the batch finishes.")
@click.option(
    "--max-cost-usd",
    type=click.FloatRange(min=0, min_open=True),
    help="A new budget cap for the batch (after it stopped at its old one).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Resume a batch that still has live tasks: queue only what none of them will produce.",
)
@FAIL_ON_DEGRADED
@user_errors
def resume(
    batch_id: str,
    missing_only: bool,
    wait: bool,
    max_cost_usd: float | None,
    force: bool,
    fail_on_degraded: bool,
) -> None:
    """Judge again the samples of a batch that have no successful result, or go on with the
    submission of a batch whose producer stopped."""
    batch = attach(batch_id)
    resumed = batch.resume(missing_only, max_cost_usd, force=force)
    if resumed.items_continued is not None:
        click.echo(
            f"{batch_id}: submission continued; queued the remaining "
            f"{resumed.items_continued} items"
        )
    else:
        click.echo(f"{batch_id}: re-enqueued {resumed.samples} samples in {resumed.cells} cells")
        if resumed.generation_items:
            click.echo(
                f"{batch_id}: re-enqueued the generation of {resumed.generation_items} items' "
                "outputs"
            )
    if wait and resumed.queued:
        sys.exit(follow_to_end(batch, make_console(), None, Display.BAR, fail_on_degraded))
