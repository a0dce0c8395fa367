"""The `jury` command: one group, its commands in modules by what they do (cli_batches: run
batches; cli_inspect: read what they produced; cli_services: the processes around them).
User mistakes get one clear paragraph and a non-zero exit, no traceback (cli_common)."""

from __future__ import annotations

import click

from jury._version import version_line
from jury.cli.agreement import agreement
from jury.cli.batches import cancel, results, resume, status, submit
from jury.cli.browse import list_batches, report, show
from jury.cli.compare import compare
from jury.cli.services import demo, exporter, flower, init, simulate, worker
from jury.errors import ctrl_c_ends_quietly


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(version_line())
        ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    "-V",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Print jury's version, Python's and the main libraries', then exit.",
)
def jury() -> None:
    """jury: score batches of LLM outputs with a distributed panel of LLM judges."""


for command in (
    init,
    submit,
    status,
    list_batches,
    results,
    show,
    report,
    cancel,
    resume,
    agreement,
    compare,
    worker,
    exporter,
    simulate,
    flower,
    demo,
):
    jury.add_command(command)


def main() -> None:
    try:
        jury(prog_name="jury")
    finally:  # the command is done; a Ctrl-C while Python exits ends it without a traceback
        ctrl_c_ends_quietly()
