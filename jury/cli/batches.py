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
from jury.batchfile.loading import load_batch
from jury.batchfile.overrides import SubmitOptions, sample_items
from jury.batchfile.planning import plan_batch
from jury.batchfile.starter import first_items
from jury.cli.common import (
    FAIL_ON_DEGRADED,
    errors_console,
    fail,
    follow_to_end,
    load_settings,
    user_errors,
)
from jury.errors import JuryError
from jury.producer.following import Display, print_progress, print_verdicts, snapshot, status_json
from jury.results.csv_records import write_csv
from jury.results.formats import (
    FORMATS,
    make_console,
    write_json,
    write_jsonl,
)
from jury.results.labelled import read_records
from jury.results.plan_table import print_plan
from jury.results.provider_batches import (
    open_provider_batches,
    print_provider_batches,
    provider_batches_json,
)
from jury.results.samples import SAMPLE_FORMATS, write_samples
from jury.schemas.identifiers import batch_id_problem
from jury.schemas.status import BatchState
from jury.store.engine import session_factory
from jury.store.inspection import iter_batch_samples
from jury.store.repository import batch_status, load_config


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
    options = SubmitOptions(sets, temperature, concurrency, model)
    source = load_batch(file, adjust=options.apply)
    if limit is not None:
        source = first_items(source, limit)
    if sample is not None:
        source = sample_items(source, sample, seed or 0)
    console = make_console()
    if dry_run:
        plan = plan_batch(
            source.config, source.stats.count, source.stats.text_chars, source.stats.cells
        )
        if as_json:
            click.echo(json.dumps(plan.as_dict()))
        else:
            print_plan(console, source.config.name, plan)
        return
    from jury.producer.publishing import check_broker, create_producer_app
    from jury.producer.submission import new_batch_id, submit_batch

    settings = load_settings()
    check_broker(settings)
    sessions = session_factory(settings.database_url)
    batch_id = batch_id or new_batch_id()
    display = Display.QUIET if quiet else Display.JSON if as_json else Display.BAR
    config = source.config
    opening = (
        f"batch {batch_id}: {source.stats.count} items × {len(config.dimensions)} dimensions × "
        f"{config.samples_per_cell} samples"
        if not config.per_item_dimensions
        else f"batch {batch_id}: {source.stats.count} items, {source.stats.cells} (item, "
        f"dimension) cells by each item's criteria × {config.samples_per_cell} samples"
    )
    if display == Display.BAR:
        console.print(Text(opening), highlight=False)
    elif display == Display.JSON:
        errors_console().print(Text(opening), highlight=False)
    try:
        submit_batch(source, sessions, create_producer_app(settings), batch_id)
    except KeyboardInterrupt:
        fail(
            f"submission of batch {batch_id} interrupted: what was queued will be judged; "
            f"`jury resume {batch_id}` queues the rest, `jury cancel {batch_id}` drops it all",
            code=130,
        )
    code = 0
    if wait:
        code = follow_to_end(
            settings, sessions, batch_id, console, timeout, display, fail_on_degraded, True
        )
    elif display == Display.BAR:
        console.print(
            f"queued; follow it with `jury status {batch_id} --watch`",
            markup=False,
            highlight=False,
        )
    click.echo(batch_id)
    sys.exit(code)


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
    settings = load_settings()
    sessions = session_factory(settings.database_url)
    if watch:
        display = Display.QUIET if quiet else Display.JSON if as_json else Display.BAR
        code = follow_to_end(
            settings, sessions, batch_id, make_console(), timeout, display, fail_on_degraded
        )
        sys.exit(code)
    if as_json:
        # The versions that answer, so that a bug report says what ran.
        record = {**status_json(*snapshot(sessions, batch_id)), "versions": runtime_versions()}
        record["provider_batches"] = provider_batches_json(sessions, batch_id)
        click.echo(json.dumps(record))
        return
    console = make_console()
    print_progress(sessions, batch_id, console)
    print_provider_batches(sessions, batch_id, console)


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
    """Print a batch's result records (one per item and dimension)."""
    fmt = fmt or ("csv" if samples else "table")
    sessions = session_factory(load_settings().database_url)
    state = batch_status(sessions, batch_id)
    config = load_config(sessions, batch_id)
    if samples and fmt not in SAMPLE_FORMATS:
        fail(
            "--samples writes json, jsonl or csv (`--format json`); to read one item's "
            f"judgments in the terminal, `jury show {batch_id} ITEM`"
        )
    if fmt == "table":
        if output is None:
            print_verdicts(sessions, batch_id, make_console())
            return
        with _open(output) as table_file:  # closed, so the table is complete on disk
            print_verdicts(sessions, batch_id, Console(file=table_file, width=200))
        return
    out = _open(output) if output else sys.stdout
    try:
        if samples:
            write_samples(out, fmt, state, iter_batch_samples(sessions, batch_id))
            return
        verdicts = read_records(sessions, batch_id, config)
        if fmt == "json":
            write_json(out, state, verdicts)
        elif fmt == "jsonl":
            write_jsonl(out, verdicts)
        else:
            write_csv(
                out,
                verdicts,
                [j.name for j in config.panel],
                pairwise=config.pairwise is not None,
                labelled=config.has_labels,
                calibrated=config.resolved_calibration is not None,
                methods=config.aggregation.reported_methods,
                uncertainty=config.aggregation.report_uncertainty,
                pass_vote=config.pass_vote,
            )
    finally:
        if output:
            out.close()


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
    from jury.producer.control import cancel_batch, drop_parked_tasks

    settings = load_settings()
    sessions = session_factory(settings.database_url)
    state = cancel_batch(sessions, batch_id)
    click.echo(f"{batch_id}: {state.value}")
    if state == BatchState.CANCELLED:
        dropped = drop_parked_tasks(settings, batch_id)
        if dropped:
            click.echo(f"{dropped} tasks waiting for a rate-limit slot dropped")
    waiting = open_provider_batches(sessions, batch_id)
    if waiting:
        click.echo(f"{waiting} open provider batches: the workers cancel them at their next poll")


@click.command()
@click.argument("batch_id")
@click.option("--missing-only", is_flag=True, help="Only samples with no result, not failed ones.")
@click.option("--wait", is_flag=True, help="Follow progress until the batch finishes.")
@click.option(
    "--max-cost-usd",
    type=click.FloatRange(min=0, min_open=True),
    help="A new budget cap for the batch (after it stopped at its old one).",
)
@FAIL_ON_DEGRADED
@user_errors
def resume(
    batch_id: str,
    missing_only: bool,
    wait: bool,
    max_cost_usd: float | None,
    fail_on_degraded: bool,
) -> None:
    """Judge again the samples of a batch that have no successful result, or go on with the
    submission of a batch whose producer stopped."""
    from jury.producer.control import raise_budget, resume_batch
    from jury.producer.publishing import check_broker, create_producer_app
    from jury.producer.submission import continue_submission
    from jury.store.repository import batch_state

    settings = load_settings()
    check_broker(settings)
    sessions = session_factory(settings.database_url)
    if max_cost_usd is not None:
        raise_budget(sessions, settings, batch_id, max_cost_usd)
    app = create_producer_app(settings)
    if batch_state(sessions, batch_id) == BatchState.SUBMITTING:
        n_items = continue_submission(sessions, app, batch_id)
        click.echo(f"{batch_id}: submission continued; queued the remaining {n_items} items")
        plan = None
    else:
        plan = resume_batch(sessions, app, batch_id, missing_only)
        click.echo(f"{batch_id}: re-enqueued {plan.n_samples} samples in {len(plan.cells)} cells")
        if plan.generations:
            n_items = len({ref.item_id for ref in plan.generations})
            click.echo(f"{batch_id}: re-enqueued the generation of {n_items} items' outputs")
    if wait and (plan is None or plan.cells or plan.generations):
        console = make_console()
        sys.exit(
            follow_to_end(
                settings, sessions, batch_id, console, None, Display.BAR, fail_on_degraded
            )
        )
