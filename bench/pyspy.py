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


# Where a worker's samples went: a stack belongs to the first of these steps one of whose
# marks (a substring of a frame's text) is in it.
STEPS = [
    ("send gate", ("_pass_send_gate", "RedisRateLimiter.send_gate", "RedisRateLimiter.sent")),
    ("slot reservation", ("wait_for_slot", "RedisRateLimiter.reserve")),
    ("store: samples", ("store_writes", "record_writes")),
    ("store: prepare", ("_prepare_all",)),
    ("store: verdicts", ("aggregate_cells",)),
    ("parking", ("Parking.", "Housekeeper.")),
    ("liveness", ("Liveness.",)),
    ("the call (HTTP, LiteLLM)", ("llm_client.py", "openai_wire", "litellm/", "aiohttp/")),
    ("deliveries (kombu, BRPOP)", ("kombu/",)),
    ("Celery: requests, tracer, acks", ("celery/",)),
    ("engine pool", ("engine/pool.py",)),
    ("task bodies, judging", ("jury/",)),
    ("event loop", ("asyncio/",)),
]


def step_of(frames: list[str]) -> str:
    for step, marks in STEPS:
        if any(mark in frame for frame in frames for mark in marks):
            return step
    return "other"


def steps(paths: list[Path]) -> Counter[str]:
    """Samples per step (STEPS) in these raw files."""
    counted: Counter[str] = Counter()
    for path in paths:
        for frames, count in stacks(path):
            counted[step_of(frames)] += count
    return counted


def main() -> None:
    """Compare runs' profiles per 1,000 judgments: `python -m bench.pyspy DIR LABEL:JUDGMENTS
    ...` (LABEL: the run's files' prefix, e.g. jury-2w)."""
    import sys

    folder = Path(sys.argv[1])
    runs = [arg.rpartition(":") for arg in sys.argv[2:]]
    counts = {
        label: (steps(sorted(folder.glob(f"{label}-worker-*.txt"))), int(judgments))
        for label, _, judgments in runs
    }
    names = sorted(
        {s for c, _ in counts.values() for s in c},
        key=lambda s: -sum(c[s] * 1000 / j for c, j in counts.values()),
    )
    print(f"{'samples per 1,000 judgments':<32}" + "".join(f"{lb:>16}" for lb in counts))
    for name in [*names, "all"]:
        row = [
            (sum(c.values()) if name == "all" else c[name]) * 1000 / j for c, j in counts.values()
        ]
        print(f"{name:<32}" + "".join(f"{v:>16.0f}" for v in row))


if __name__ == "__main__":
    main()
