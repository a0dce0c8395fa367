"""What every `jury` command shares: one paragraph instead of a traceback, exit codes, the
settings, and following a batch to its end (with Ctrl-C leaving it running).

Exit codes: 0 done (completed, or degraded without --fail-on-degraded); 1 the batch failed,
was cancelled or stopped; 2 bad input or configuration; 3 `--wait`/`--watch` gave up at
`--timeout`, or after the store was unreachable for longer than a follower waits (the batch
goes on); 4 degraded, with --fail-on-degraded; 130 interrupted (the batch goes on).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console
from rich.text import Text

from jury.api import Batch, resolve_settings
from jury.broker.redis_client import outage
from jury.errors import EXIT_INTERRUPTED, JuryError
from jury.producer.following import Display, interrupted, print_outcome, print_verdicts
from jury.producer.outages import FollowingLost
from jury.results.terminal import safe_text
from jury.schemas.status import BatchState, BatchStatus
from jury.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])
EXIT_FAILED, EXIT_USAGE, EXIT_TIMEOUT, EXIT_DEGRADED = 1, 2, 3, 4
# Batches whose verdict table is worth printing at the end.
SCORED = (BatchState.COMPLETED, BatchState.DEGRADED)


def errors_console() -> Console:
    return Console(stderr=True, soft_wrap=True)


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print one paragraph on stderr (as text: it may hold a user's or a provider's words)."""
    line = Text.assemble(("error: ", "bold red"), safe_text(message, multiline=True))
    errors_console().print(line, highlight=False)
    sys.exit(code)


def user_errors(command: F) -> F:
    """Turn JuryError, an unreachable Redis or database (and a broken pipe) into a clean
    message and exit code. Any other exception is our bug: its traceback stays."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except JuryError as exc:
            fail(str(exc))
        except BrokenPipeError:
            sys.exit(0)
        except Exception as exc:
            line = outage(exc)
            if line is None:
                raise
            fail(
                f"{line}. Nothing of the batch was changed by this command; its workers go on "
                "where they can. Try again once it answers.",
                EXIT_FAILED,
            )

    return wrapper  # type: ignore[return-value]


def load_settings() -> Settings:
    try:
        return resolve_settings(None)
    except JuryError as exc:
        fail(str(exc))


def display_mode(quiet: bool, as_json: bool) -> Display:
    return Display.QUIET if quiet else Display.JSON if as_json else Display.BAR


def exit_code(
    status: BatchStatus | None, timeout: float | None, fail_on_degraded: bool = False
) -> int:
    """The exit code of a followed batch; says on stderr why it is not 0."""
    errors = errors_console()
    if status is None:
        errors.print(f"still running after {timeout or 0:g} s", style="yellow", highlight=False)
        return EXIT_TIMEOUT
    if status.status == BatchState.COMPLETED:
        return 0
    if status.status == BatchState.DEGRADED:
        return EXIT_DEGRADED if fail_on_degraded else 0
    errors.print(
        Text.assemble(
            (f"batch {status.status.value}", "red"),
            ": ",
            safe_text(status.error or "", multiline=True),
        ),
        highlight=False,
    )
    return EXIT_FAILED


def follow_to_end(
    batch: Batch,
    console: Console,
    timeout: float | None = None,
    display: Display = Display.BAR,
    fail_on_degraded: bool = False,
    verdicts: bool = False,
) -> int:
    """Follow the batch until it finishes, say how it ended (under its verdict table, with
    `verdicts`, when it has scores), and return the exit code. Ctrl-C stops following, not
    the batch, and says how to follow it again."""
    try:
        status = batch.follow(console, timeout, display, sys.stdout)
    except KeyboardInterrupt:
        errors_console().print(Text(interrupted(batch.id), style="yellow"), highlight=False)
        return EXIT_INTERRUPTED
    except FollowingLost as exc:  # the store away for longer than a follower waits
        errors_console().print(safe_text(str(exc), "yellow", multiline=True), highlight=False)
        return EXIT_TIMEOUT
    if status is not None and status.status.finished:
        if verdicts and display == Display.BAR and status.status in SCORED:
            print_verdicts(batch.sessions, batch.id, console)
        shown_on = console if display == Display.BAR else errors_console()
        print_outcome(batch.sessions, status, shown_on)
    return exit_code(status, timeout, fail_on_degraded)


FAIL_ON_DEGRADED = click.option(
    "--fail-on-degraded",
    is_flag=True,
    help="Exit 4 when the batch ends degraded (some judge failed): for CI.",
)
