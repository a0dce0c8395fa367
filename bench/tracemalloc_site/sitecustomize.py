"""Bench only: where a worker's Python memory grows (`python -m bench.scale --tracemalloc F`).

With this folder on PYTHONPATH, Python's `site` imports this module in every process it
starts. It does nothing unless JURY_BENCH_TRACEMALLOC names a file and the process is a
`jury.worker` whose command line holds JURY_BENCH_TRACEMALLOC_NODE (a part of its node name):
then, JURY_BENCH_TRACEMALLOC_START_S seconds in (once the worker has started: traced, its
imports took longer than a bench waits for it), it starts tracemalloc
(JURY_BENCH_TRACEMALLOC_FRAMES frames a trace), takes a first snapshot
JURY_BENCH_TRACEMALLOC_WARMUP_S seconds later, and every
JURY_BENCH_TRACEMALLOC_EVERY_S seconds appends to the file (its name followed by the pid)
the allocation sites that grew most since that first snapshot, by line and by traceback.
Nothing of it is in jury's own code: a worker started without these variables never sees it.
"""

from __future__ import annotations

import os
import sys


def _wanted() -> str | None:
    path = os.environ.get("JURY_BENCH_TRACEMALLOC")
    node = os.environ.get("JURY_BENCH_TRACEMALLOC_NODE", "")
    argv = " ".join(getattr(sys, "orig_argv", []))
    if not path or "jury.worker" not in argv or node not in argv:
        return None
    return f"{path}.{os.getpid()}"


def _watch(path: str) -> None:
    import linecache
    import threading
    import time
    import tracemalloc

    start = float(os.environ.get("JURY_BENCH_TRACEMALLOC_START_S", "60"))
    frames = int(os.environ.get("JURY_BENCH_TRACEMALLOC_FRAMES", "8"))
    warmup = float(os.environ.get("JURY_BENCH_TRACEMALLOC_WARMUP_S", "120"))
    every = float(os.environ.get("JURY_BENCH_TRACEMALLOC_EVERY_S", "120"))
    ignored = [
        tracemalloc.Filter(False, tracemalloc.__file__),
        tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
        tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>"),
        tracemalloc.Filter(False, "<unknown>"),
        tracemalloc.Filter(False, linecache.__file__),  # this hook's own tracebacks
    ]

    def snapshot() -> tracemalloc.Snapshot:
        return tracemalloc.take_snapshot().filter_traces(ignored)

    def run() -> None:
        time.sleep(start)
        tracemalloc.start(frames)
        time.sleep(warmup)
        first, started = snapshot(), time.monotonic()
        while True:
            time.sleep(every)
            now = snapshot()
            minutes = (time.monotonic() - started) / 60
            traced, peak = tracemalloc.get_traced_memory()
            with open(path, "a", encoding="utf-8") as out:
                out.write(
                    f"\n=== {minutes:.1f} min after the first snapshot; traced "
                    f"{traced / 2**20:.1f} MB (peak {peak / 2**20:.1f})\n"
                )
                for stat in now.compare_to(first, "lineno")[:25]:
                    out.write(f"{stat}\n")
                out.write("--- by traceback\n")
                for stat in now.compare_to(first, "traceback")[:8]:
                    out.write(f"{stat}\n")
                    for line in stat.traceback.format(limit=frames):
                        out.write(f"    {line}\n")

    threading.Thread(target=run, name="bench-tracemalloc", daemon=True).start()


_path = _wanted()
if _path is not None:
    _watch(_path)
