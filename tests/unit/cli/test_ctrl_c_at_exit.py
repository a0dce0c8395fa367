"""A Ctrl-C while a `jury` command's process exits (threads joining, atexit callbacks such as
LiteLLM's running) ends it quietly with 130, instead of Python's `Exception ignored in atexit
callback … KeyboardInterrupt` and a traceback."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

# An exit callback that takes a while, and the user's Ctrl-C arriving while it runs. atexit
# runs the last registered first: this one, before any of the libraries'.
SLOW_EXIT = """
import atexit, os, signal, sys, time
{setup}
def slow_cleanup():
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(3)
    print("the callback went on after Ctrl-C", file=sys.stderr)
atexit.register(slow_cleanup)
{run}
"""


def _exit_interrupted(setup: str, run: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SLOW_EXIT.format(setup=setup, run=run)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_ctrl_c_while_the_cli_exits_ends_it_quietly() -> None:
    done = _exit_interrupted(
        "from jury.cli.main import main\nsys.argv = ['jury', '--version']", "main()"
    )
    assert done.returncode == 130, done.stderr
    assert done.stdout.startswith("jury ")  # the command's own output is kept
    assert done.stderr == ""  # no "Exception ignored in atexit callback", no traceback


def test_without_it_python_prints_a_traceback() -> None:
    """What it prevents, shown: the same callback in a plain Python process."""
    done = _exit_interrupted("", "")
    assert "Exception ignored in atexit callback" in done.stderr
    assert "KeyboardInterrupt" in done.stderr


def test_after_it_ctrl_c_ends_the_process_at_once() -> None:
    done = _exit_interrupted(
        "from jury.errors import ctrl_c_ends_quietly",
        "print('done', flush=True)\nctrl_c_ends_quietly()",
    )
    assert (done.returncode, done.stdout, done.stderr) == (130, "done\n", "")
