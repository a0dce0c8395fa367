"""Ctrl-C in `jury demo`, pressed on a terminal as a user does (the whole foreground process
group gets SIGINT: the demo, its simulator and its worker): the demo says it was interrupted,
exits 130, shows neither a traceback nor its processes' logs, and leaves no process behind."""

from __future__ import annotations

import os
import pty
import select
import signal
import time
from pathlib import Path

import psutil
import pytest

from tests.integration.test_cli import JURY

pytestmark = pytest.mark.integration


def _read_until(fd: int, seen: bytearray, wanted: bytes, deadline: float) -> bool:
    """Read the terminal into `seen` until `wanted` shows or the deadline passes (or it ends)."""
    while wanted not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the other end closed: the process ended
                return wanted in seen
            if not chunk:
                return wanted in seen
            seen += chunk
    return wanted in seen


def test_ctrl_c_in_the_demo_ends_it_quietly(tmp_path: Path, redis_url: str) -> None:
    env = {
        **os.environ,
        "JURY_BROKER_URL": redis_url,
        "JURY_DATABASE_URL": f"sqlite:///{tmp_path / 'jury.db'}",
        "COLUMNS": "160",
    }
    pid, fd = pty.fork()
    if pid == 0:  # the child: a session of its own on the terminal, as a shell would start it
        os.chdir(tmp_path)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.execve(JURY[0], [*JURY, "demo"], env)
    seen = bytearray()
    status: int | None = None
    try:
        # Ctrl-C while the worker starts: the demo's processes are all up or coming up.
        assert _read_until(fd, seen, b"starting a worker", time.monotonic() + 60), seen
        os.write(fd, b"\x03")  # the terminal turns it into SIGINT for the process group
        _read_until(fd, seen, b"\x00never", time.monotonic() + 60)  # to its end
        deadline = time.monotonic() + 10
        while status is None and time.monotonic() < deadline:
            ended, code = os.waitpid(pid, os.WNOHANG)
            status = code if ended else None
            select.select([], [], [], 0.05)
    finally:
        if status is None:  # it did not end by itself: not left running
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    text = seen.decode(errors="replace")
    assert status is not None and os.waitstatus_to_exitcode(status) == 130, text
    assert "demo interrupted: every process it started is stopped" in text
    for noise in ("Traceback", "Exception ignored", "log ---", "Aborted"):
        assert noise not in text, text
    left = [
        p.info["cmdline"]
        for p in psutil.process_iter(["cmdline"])
        if f"jury-demo-{pid}" in " ".join(p.info["cmdline"] or [])
    ]
    assert left == []
