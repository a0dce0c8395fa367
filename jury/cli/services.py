"""`jury worker`, `exporter`, `simulate`, `flower`, `demo` and `init`: the processes around
batches, and a starting point."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from jury.cli.common import load_settings, user_errors
from jury.local.services import python_module
from jury.results.formats import make_console

_PASSTHROUGH = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []}


@click.command(context_settings={"ignore_unknown_options": True})
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
    from jury.local.flower import run_flower

    extra = tuple(a for a in flower_options if a != "--")
    sys.exit(run_flower(load_settings(), port, address, basic_auth, extra))


@click.command(context_settings=_PASSTHROUGH, add_help_option=False)
@click.pass_context
def worker(ctx: click.Context) -> None:
    """Run a worker (extra options go to `celery worker`, e.g. `-- --concurrency 32`).

    `--processes N` (JURY_WORKER_PROCESSES; 0: one per core) runs N worker processes forked
    from one parent that loads LiteLLM once, so that they share its memory; the parent
    replaces a process that dies and stops them all on SIGTERM."""
    args = [a for a in ctx.args if a != "--"]
    os.execv(sys.executable, [*python_module("jury.worker"), *args])


@click.command()
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=9465,
    show_default=True,
    help="Port to serve /metrics on.",
)
@click.option(
    "--address",
    default="127.0.0.1",
    show_default=True,
    help="Interface to listen on (0.0.0.0: every interface, e.g. in a container).",
)
@click.option("--once", is_flag=True, help="Print the metrics once and exit, serving nothing.")
@user_errors
def exporter(port: int, address: str, once: bool) -> None:
    """Serve the fleet's metrics for Prometheus: tasks queued, held, parked and waiting per
    queue, workers alive, running batches' spend against their budget. One per deployment
    (JURY_QUEUE); each worker serves its own calls' metrics (JURY_METRICS_PORT). See
    docs/monitoring.md."""
    from jury.worker.metrics.exporter import run_exporter

    sys.exit(run_exporter(load_settings(), port, address, once))


@click.command(context_settings=_PASSTHROUGH, add_help_option=False)
@click.pass_context
def simulate(ctx: click.Context) -> None:
    """Run the judge simulator (see `jury simulate --help`)."""
    os.execv(sys.executable, [*python_module("jury.simulator"), *ctx.args])


@click.command()
@user_errors
def demo() -> None:
    """Run the demo batch end to end on this machine, starting whatever is missing."""
    from jury.local.demo import run_demo

    sys.exit(run_demo(make_console()))


@click.command()
@click.argument(
    "folder", type=click.Path(file_okay=False, path_type=Path), default=Path("."), required=False
)
@click.option("--force", is_flag=True, help="Replace batch.yaml and items.jsonl if they exist.")
@user_errors
def init(folder: Path, force: bool) -> None:
    """Write a starter batch.yaml and items.jsonl into FOLDER (default: here) that `jury
    submit` accepts as they are; edit them to judge your own outputs."""
    from jury.batchfile.starter import write_starter

    batch, items = write_starter(folder, force)
    click.echo(
        f"wrote {batch} and {items}. Try it against the bundled simulator:\n"
        "  jury simulate --port 8011 &\n"
        "  jury worker &\n"
        f"  jury submit {batch} --wait\n"
        f"then edit {batch} to point the judges at real models (see the comments in it)."
    )
