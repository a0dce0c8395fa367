"""The `jury` command: one group, its commands in modules by what they do (cli_batches: run
batches; cli_inspect: read what they produced; cli_services: the processes around them).
User mistakes get one clear paragraph and a non-zero exit, no traceback (cli_common)."""

from __future__ import annotations

import importlib

import click

from jury._version import version_line
from jury.errors import ctrl_c_ends_quietly

# Each command's module and name, in the order of the reference (docs/cli.md). A command's
# module is imported only when that command runs (or help lists it): `jury status` need not
# load the agreement statistics, nor `jury --version` the store; every command starts faster.
# Click's documented way: a Group overriding list_commands and get_command ("Lazily Loading
# Subcommands" in click's docs).
COMMANDS = {
    "init": "jury.cli.services:init",
    "submit": "jury.cli.batches:submit",
    "status": "jury.cli.batches:status",
    "list": "jury.cli.browse:list_batches",
    "results": "jury.cli.batches:results",
    "show": "jury.cli.browse:show",
    "report": "jury.cli.browse:report",
    "cancel": "jury.cli.batches:cancel",
    "resume": "jury.cli.batches:resume",
    "agreement": "jury.cli.agreement:agreement",
    "compare": "jury.cli.compare:compare",
    "worker": "jury.cli.services:worker",
    "exporter": "jury.cli.services:exporter",
    "simulate": "jury.cli.services:simulate",
    "flower": "jury.cli.services:flower",
    "demo": "jury.cli.services:demo",
}


class LazyGroup(click.Group):
    """A group whose commands are imported when they are looked up."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, _, name = COMMANDS[cmd_name].partition(":")
        command = getattr(importlib.import_module(module), name)
        assert isinstance(command, click.Command) and command.name == cmd_name
        return command


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(version_line())
        ctx.exit()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
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


def main() -> None:
    try:
        jury(prog_name="jury")
    finally:  # the command is done; a Ctrl-C while Python exits ends it without a traceback
        ctrl_c_ends_quietly()
