"""py-spy on a benchmark's workers: where their CPU goes, sampled while a run goes on.

    .venv/bin/python -m bench.ratelimit --py-spy /path/to/py-spy --profile-dir DIR ...

py-spy (PyPI: `pip install --target DIR py-spy`) samples each worker at `rate` Hz with
`--gil` (only the thread holding the GIL: CPU, not waiting), written in its raw format (one
line per distinct stack, its count last), one file per worker. `summary` folds such files
into a count per frame, to compare two runs per 1,000 judgments.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def recording(
    py_spy: str | None, folder: Path | None, label: str, pids: dict[str, int], rate: int = 100
) -> Iterator[None]:
    """py-spy on each of `pids` (name: pid) for the block; nothing without `py_spy`."""
    if not py_spy or folder is None:
        yield
        return
    folder.mkdir(parents=True, exist_ok=True)
    spies = [
        subprocess.Popen(
            [
                py_spy,
                "record",
                "--gil",
                "--nonblocking",
                "--rate",
                str(rate),
                "--pid",
                str(pid),
                "--format",
                "raw",
                "-o",
                str(folder / f"{label}-{name}.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for name, pid in pids.items()
    ]
    try:
        yield
    finally:
        for spy in spies:
            spy.send_signal(2)  # SIGINT: py-spy writes what it sampled, then ends
        for spy in spies:
            spy.wait(60)


def stacks(path: Path) -> Iterator[tuple[list[str], int]]:
    """(frames, the root first; samples) of each line of a py-spy raw file."""
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            yield stack.split(";"), int(count)


def frame_totals(paths: list[Path]) -> tuple[Counter[str], int]:
    """Samples per frame (a frame counted once per stack it is in), and the samples in all."""
    totals: Counter[str] = Counter()
    samples = 0
    for path in paths:
        for frames, count in stacks(path):
            samples += count
            for frame in set(frames):
                totals[frame] += count
    return totals, samples
