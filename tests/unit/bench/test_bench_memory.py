"""bench/memory's sampler: every process of a worker's tree, and the sum of one sample."""

from __future__ import annotations

import subprocess
import sys

import psutil

from bench.memory import Sampler, smaps
from jury.local.services import wait_for

FORKS = "import os, time\nif os.fork() == 0:\n    time.sleep(60)\n    os._exit(0)\ntime.sleep(60)\n"


def test_a_worker_s_children_are_counted_apart_and_summed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", FORKS])
    try:
        wait_for(lambda: bool(psutil.Process(parent.pid).children()), 10, "the forked child")
        sampler = Sampler()
        sampler.watch("worker1", parent.pid)
        sampler.sample()
        figures = sampler.figures()
        assert set(figures["processes"]) == {"worker1 (parent)", "worker1.1"}
        parent_rss, parent_pss = smaps(parent.pid)
        # They share the interpreter's pages: PSS counts them once between the two.
        assert 0 < parent_pss < parent_rss
        assert figures["total_pss_mb"] < figures["total_rss_mb"]
    finally:
        parent.kill()
        parent.wait()
