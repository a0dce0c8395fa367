"""Ctrl-C while a worker (or the simulator) starts (importing LiteLLM and warming it up take
seconds): it exits 130 without a traceback, and stopping it before its housekeeping began
raises nothing."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from jury.worker.engine.housekeeping import Housekeeper
from tests.conftest import ROOT

# `python -m MODULE`, with the user's Ctrl-C arriving while it imports IMPORTED.
INTERRUPTED_START = """
import builtins, os, runpy, signal, sys
real_import = builtins.__import__
def importing(name, *args, **kwargs):
    if name == {imported!r}:
        os.kill(os.getpid(), signal.SIGINT)
    return real_import(name, *args, **kwargs)
builtins.__import__ = importing
sys.argv = [{module!r}]
runpy.run_module({module!r}, run_name="__main__")
"""


@pytest.mark.parametrize(
    ("module", "imported"),
    [("jury.worker", "jury.worker.app"), ("jury.simulator", "jury.simulator.server")],
)
def test_a_worker_or_simulator_interrupted_while_it_starts_exits_130_quietly(
    module: str, imported: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_START.format(module=module, imported=imported)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    assert done.returncode == 130, done.stderr
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr


def test_stopping_housekeeping_that_never_started_raises_nothing() -> None:
    """It did: "cannot join thread before it is started", a second traceback after Ctrl-C."""

    def no_runtime() -> Any:
        raise AssertionError("never built: the thread never ran")

    housekeeper = Housekeeper(no_runtime, None)
    housekeeper.stop()
    assert housekeeper.stopped.is_set() and not housekeeper.is_alive()
