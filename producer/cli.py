"""The `jury` command. User mistakes get one clear paragraph and a non-zero exit, no traceback.

Exit codes: 0 done; 1 the batch failed or was cancelled; 2 bad input or configuration;
3 `--wait` gave up at `--timeout`.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console

from producer.following import (
    Display,
    follow_batch,
    print_progress,
    print_verdicts,
    snapshot,
    status_json,
)
from producer.loading import load_batch
from producer.planning import plan_batch
from producer.reporting import FORMATS, make_console, print_plan, write_csv, write_json, write_jsonl
from schemas.errors import JuryError
from schemas.settings import Settings
from schemas.status import BatchState, BatchStatus
from store.cells import iter_verdicts
from store.engine import session_factory
from store.repository import batch_status, load_config

F = TypeVar("F", bound=Callable[..., Any])
EXIT_FAILED, EXIT_USAGE, EXIT_TIMEOUT = 1, 2, 3


def _fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    Console(stderr=True, soft_wrap=True).print(
        f"[bold red]error:[/] {message}", highlight=False, markup=True
    )
    sys.exit(code)


def user_errors(command: F) -> F:
    """Turn JuryError (and a broken pipe) into a clean message and exit code."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except JuryError as exc:
            _fail(str(exc))
        except BrokenPipeError:
            sys.exit(0)

    return wrapper  # type: ignore[return-value]


def _settings() -> Settings:
    try:
        return Settings.from_env()
    except Exception as exc:
        _fail(f"bad JURY_* environment: {exc}")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def jury() -> None:
    """jury: score batches of LLM outputs with a distributed panel of LLM judges."""


@jury.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--wait", is_flag=True, help="Follow progress until the batch finishes.")
@click.option("--batch-id", help="Use this id instead of a generated one.")
@click.option("--dry-run", is_flag=True, help="Validate and print the plan; enqueue nothing.")
@click.option("--timeout", type=float, help="With --wait: give up after this many seconds.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print JSON: the plan with --dry-run; progress, one object per line, with --wait.",
)
@click.option("--quiet", "-q", is_flag=True, help="Print only the batch id (and errors).")
@user_errors
def submit(
    file: Path,
    wait: bool,
    batch_id: str | None,
    dry_run: bool,
    timeout: float | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Validate FILE, record it and enqueue one task per (item, dimension, judge, sample)."""
    source = load_batch(file)
    console = make_console()
    if dry_run:
        plan = plan_batch(source.config, source.stats.count, source.stats.text_chars)
        if as_json:
            click.echo(json.dumps(plan.as_dict()))
        else:
            print_plan(console, source.config.name, plan)
        return
    from producer.publishing import check_broker, create_producer_app
    from producer.submission import submit_batch

    settings = _settings()
    check_broker(settings)
    sessions = session_factory(settings.database_url)
    batch_id = submit_batch(source, sessions, create_producer_app(settings), batch_id)
    display = _display(quiet, as_json)
    if display == Display.BAR:
        console.print(
            f"submitted {source.stats.count} items × {len(source.config.dimensions)} dimensions"
            f" × {source.config.samples_per_cell} samples",
            highlight=False,
        )
    code = 0
    if wait:
        status = follow_batch(sessions, batch_id, console, timeout, display)
        code = _finished(status, timeout)
        if code == 0 and display == Display.BAR:
            print_verdicts(sessions, batch_id, console)
    click.echo(batch_id)
    sys.exit(code)


def _display(quiet: bool, as_json: bool) -> Display:
    return Display.QUIET if quiet else Display.JSON if as_json else Display.BAR


def _finished(status: BatchStatus | None, timeout: float | None) -> int:
    """The exit code of a followed batch; says on stderr why it is not 0."""
    errors = Console(stderr=True, soft_wrap=True)
    if status is None:
        errors.print(f"[yellow]still running after {timeout or 0:g} s[/]")
        return EXIT_TIMEOUT
    if status.status != BatchState.COMPLETED:
        errors.print(f"[red]batch {status.status.value}[/]: {status.error or ''}", highlight=False)
        return EXIT_FAILED
    return 0


@jury.command()
@click.argument("batch_id")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.option("--watch", "-w", is_flag=True, help="Follow progress until the batch finishes.")
@click.option("--timeout", type=float, help="With --watch: give up after this many seconds.")
@click.option("--quiet", "-q", is_flag=True, help="With --watch: print nothing, just wait.")
@user_errors
def status(batch_id: str, as_json: bool, watch: bool, timeout: float | None, quiet: bool) -> None:
    """Show a batch's progress: judgments done, failed, rate, ETA and cost so far.

    With --watch, follow it live until it finishes (exit 0 if it completed, 1 if it failed or
    was cancelled, 3 at --timeout); with --json, one JSON object (per line, with --watch)."""
    sessions = session_factory(_settings().database_url)
    if watch:
        followed = follow_batch(
            sessions, batch_id, make_console(), timeout, _display(quiet, as_json), sys.stdout
        )
        sys.exit(_finished(followed, timeout))
    if as_json:
        click.echo(json.dumps(status_json(*snapshot(sessions, batch_id))))
        return
    print_progress(sessions, batch_id, make_console())


@jury.command()
@click.argument("batch_id")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), help="Write here.")
@user_errors
def results(batch_id: str, fmt: str, output: Path | None) -> None:
    """Print a batch's result records (one per item and dimension)."""
    sessions = session_factory(_settings().database_url)
    state = batch_status(sessions, batch_id)
    config = load_config(sessions, batch_id)
    judges = [j.name for j in config.panel]
    if fmt == "table":
        if output is None:
            print_verdicts(sessions, batch_id, make_console())
            return
        with output.open("w") as table_file:  # closed, so the table is complete on disk
            print_verdicts(sessions, batch_id, Console(file=table_file, width=200))
        return
    out = output.open("w", newline="") if output else sys.stdout
    try:
        verdicts = iter_verdicts(sessions, batch_id)
        if fmt == "json":
            write_json(out, state, verdicts)
        elif fmt == "jsonl":
            write_jsonl(out, verdicts)
        else:
            write_csv(out, verdicts, judges, pairwise=config.pairwise is not None)
    finally:
        if output:
            out.close()


@jury.command()
@click.argument("batch_id")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the page here (default: report-BATCH_ID.html; `-`: standard output).",
)
@user_errors
def report(batch_id: str, output: Path | None) -> None:
    """Write a self-contained HTML report: score distributions, per-judge scores, judge
    agreement, and the flagged records to review first."""
    from producer.html_report import build_report, write_report

    sessions = session_factory(_settings().database_url)
    if str(output) == "-":
        sys.stdout.write(build_report(sessions, batch_id))
        return
    output = output or Path(f"report-{batch_id}.html")
    size = write_report(sessions, batch_id, output)
    click.echo(f"wrote {output} ({size / 1024:.0f} KiB)")


@jury.command(context_settings={"ignore_unknown_options": True})
@click.option("--port", type=click.IntRange(1, 65535), default=5555, show_default=True)
@click.option(
    "--address",
    default="127.0.0.1",
    show_default=True,
    help="Interface to listen on (0.0.0.0: every interface; use --basic-auth then).",
)
@click.option(
    "--basic-auth",
    metavar="USER:PASSWORD",
    help="Require this login (default: $FLOWER_BASIC_AUTH; none if unset).",
)
@click.argument("flower_options", nargs=-1, type=click.UNPROCESSED)
@user_errors
def flower(
    port: int, address: str, basic_auth: str | None, flower_options: tuple[str, ...]
) -> None:
    """Watch workers and tasks in Flower, against JURY_BROKER_URL (more Flower options after
    `--`, e.g. `-- --url_prefix=flower`)."""
    from producer.flower_ui import run_flower

    extra = tuple(a for a in flower_options if a != "--")
    sys.exit(run_flower(_settings(), port, address, basic_auth, extra))


@jury.command()
@click.argument("batch_id")
@user_errors
def cancel(batch_id: str) -> None:
    """Stop a batch: workers skip its queued tasks; what was stored stays."""
    from producer.control import cancel_batch

    state = cancel_batch(session_factory(_settings().database_url), batch_id)
    click.echo(f"{batch_id}: {state.value}")


@jury.command()
@click.argument("batch_id")
@click.option("--missing-only", is_flag=True, help="Only samples with no result, not failed ones.")
@click.option("--wait", is_flag=True, help="Follow progress until the batch finishes.")
@click.option(
    "--max-cost-usd",
    type=click.FloatRange(min=0, min_open=True),
    help="A new budget cap for the batch (after it stopped at its old one).",
)
@user_errors
def resume(batch_id: str, missing_only: bool, wait: bool, max_cost_usd: float | None) -> None:
    """Judge again the samples of a batch that have no successful result, or go on with the
    submission of a batch whose producer stopped."""
    from producer.control import raise_budget, resume_batch
    from producer.publishing import check_broker, create_producer_app
    from producer.submission import continue_submission
    from store.repository import batch_state

    settings = _settings()
    check_broker(settings)
    sessions = session_factory(settings.database_url)
    if max_cost_usd is not None:
        raise_budget(sessions, settings.broker_url, batch_id, max_cost_usd)
    app = create_producer_app(settings)
    if batch_state(sessions, batch_id) == BatchState.SUBMITTING:
        n_items = continue_submission(sessions, app, batch_id)
        click.echo(f"{batch_id}: submission continued; queued the remaining {n_items} items")
        plan = None
    else:
        plan = resume_batch(sessions, app, batch_id, missing_only)
        click.echo(f"{batch_id}: re-enqueued {plan.n_samples} samples in {len(plan.cells)} cells")
    if wait and (plan is None or plan.cells):
        status = follow_batch(sessions, batch_id, make_console())
        sys.exit(0 if status and status.status == BatchState.COMPLETED else EXIT_FAILED)


_PASSTHROUGH = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []}


@jury.command(context_settings=_PASSTHROUGH, add_help_option=False)
@click.pass_context
def worker(ctx: click.Context) -> None:
    """Run a worker (extra options go to `celery worker`, e.g. `-- --concurrency 32`)."""
    args = [a for a in ctx.args if a != "--"]
    os.execv(sys.executable, [sys.executable, "-m", "worker", *args])


@jury.command(context_settings=_PASSTHROUGH, add_help_option=False)
@click.pass_context
def simulate(ctx: click.Context) -> None:
    """Run the judge simulator (see `jury simulate --help`)."""
    os.execv(sys.executable, [sys.executable, "-m", "simulator", *ctx.args])


@jury.command()
@user_errors
def demo() -> None:
    """Run examples/demo.yaml end to end on this machine, starting whatever is missing."""
    from producer.demo import run_demo

    sys.exit(run_demo(make_console()))


def main() -> None:
    jury(prog_name="jury")
