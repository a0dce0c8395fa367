"""The CLI reference page (docs/cli.md), generated from the click commands themselves, so it
cannot drift: `python -m jury.cli.reference docs/cli.md` (run by `make docs`)
writes it, and a test checks the committed page equals what this module generates."""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path

import click

from jury.cli.main import COMMANDS, jury

HEADER = """\
# CLI reference

Generated from the commands themselves by `python -m jury.cli.reference
docs/cli.md` (`make docs` runs it; a test checks this page is up to date). Every command
takes `-h`/`--help`. Exit codes: 0 done; 1 the batch failed, was cancelled or stopped; 2 bad
input or configuration; 3 `--timeout` ran out; 4 degraded, with `--fail-on-degraded`; 130
interrupted (the batch goes on).

`submit`, `status`, `results`, `cancel` and `resume` are calls of the
[Python API](python-api.md) (`jury.api.prepare(...).submit()`, `jury.attach(batch_id)` and
its `Batch`): a script does what these commands do.
"""


def _option_row(param: click.Parameter, ctx: click.Context) -> str:
    names = ", ".join(f"`{name}`" for name in [*param.opts, *param.secondary_opts])
    flag = getattr(param, "is_flag", False)
    kind = "flag" if flag else param.metavar or param.type.get_metavar(param, ctx)
    kind = kind or param.type.name.upper()
    help_text = " ".join((getattr(param, "help", None) or "").split())
    default = param.default if getattr(param, "show_default", False) else None
    if default not in (None, False, ()):
        help_text += f" (default: {default})"
    cell = help_text.replace("|", r"\|")
    return f"| {names} | {kind} | {cell} |"


def _command(name: str, command: click.Command) -> list[str]:
    ctx = click.Context(command, info_name=f"jury {name}")
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines = [f"## jury {name}", "", "```", f"jury {name} {usage}".rstrip(), "```", ""]
    lines += [inspect.cleandoc(command.help or ""), ""]
    options = [p for p in command.params if isinstance(p, click.Option)]
    if options:
        lines += ["| option | value | meaning |", "|---|---|---|"]
        lines += [_option_row(p, ctx) for p in options]
        lines.append("")
    return lines


def _simulator_help() -> str:
    from jury.simulator.config import build_parser

    parser = build_parser()
    parser.prog = "jury simulate"
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=96)
    return parser.format_help().rstrip()


def reference() -> str:
    """The whole page, commands in the order of jury.cli.main.COMMANDS."""
    assert isinstance(jury, click.Group)
    lines = [HEADER]
    context = click.Context(jury, info_name="jury")
    for name in COMMANDS:
        command = jury.get_command(context, name)
        assert command is not None
        lines += _command(name, command)
        if name == "simulate":
            lines += ["```", _simulator_help(), "```", ""]
        if name == "worker":
            lines += [
                "Everything after `--` goes to `celery worker` (for example "
                "`jury worker -- --concurrency 32 --loglevel=DEBUG`); see "
                "[Configuration](configuration.md) for the JURY_* settings it reads.",
                "",
            ]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str]) -> int:
    page = reference()
    if argv:
        Path(argv[0]).write_text(page, encoding="utf-8")
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
