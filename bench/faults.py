"""Fault benchmark: the same batch run clean and run through a kill -9 of a worker's whole
process group and a Redis restart, side by side, at the default settings (heartbeat timeout
30 s, visibility timeout an hour, 256 tasks in flight per worker). Prints cells lost, cells
doubled, duplicate judge calls, how much longer the faulty run took, and how long after the
kill the last of the tasks the killed worker held was judged again and stored.

    .venv/bin/python -m bench.faults [--items 200] [--latency-ms 2000]

Everything runs on this machine: an embedded Redis with AOF, the simulator, worker processes.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from celery import Celery
from sqlalchemy import func, select

from bench.common import local_stack, simulator_stats
from jury.batchfile.loading import load_batch
from jury.local.services import ManagedProcess, wait_for
from jury.producer.submission import submit_batch
from jury.schemas.tasks import CellRef, SampleRef
from jury.settings import Settings
from jury.store.engine import session_factory
from jury.store.models import SampleRow, VerdictRow
from jury.store.repository import batch_status
from jury.store.samples import samples_of_cells
from jury.store.sql import Sessions

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def write_batch(folder: Path, api_base: str, n_items: int) -> Path:
    items = folder / "items.jsonl"
    items.write_text(
        "".join(
            json.dumps({"id": f"i{i}", "input": f"Question {i}", "output": f"Answer {i} " * 20})
            + "\n"
            for i in range(n_items)
        )
    )
    batch = folder / "batch.yaml"
    batch.write_text(
        "name: faults-bench\n"
        f"judges: [{{model: openai/balanced, n: 3, api_base: '{api_base}'}},"
        f" {{model: openai/strict, n: 3, api_base: '{api_base}'}}]\n"
        "dimensions: [relevance, accuracy]\nitems: items.jsonl\n"
    )
    return batch


def run(
    label: str,
    folder: Path,
    args: argparse.Namespace,
    faults: Callable[..., dict[str, object]] | None,
) -> dict[str, object]:
    with local_stack(
        folder,
        label,
        ["--latency-ms", str(args.latency_ms)],
        args.workers,
        appendonly=True,
        own_groups=True,
    ) as stack:
        sessions = session_factory(stack.settings.database_url)
        started = time.monotonic()
        batch_id = submit_batch(
            load_batch(write_batch(folder, stack.simulator.url, args.items)), sessions, stack.app
        )
        recovery: dict[str, object] | None = None
        if faults is not None:
            recovery = faults(stack.app, sessions, batch_id, stack.workers, stack.redis)
        wait_for(lambda: batch_status(sessions, batch_id).status.finished, 1800, "the batch")
        makespan = time.monotonic() - started
        status = batch_status(sessions, batch_id)
        with sessions() as session:
            verdicts = session.scalar(
                select(func.count()).select_from(VerdictRow).where(VerdictRow.batch_id == batch_id)
            )
            samples = session.scalar(
                select(func.count()).select_from(SampleRow).where(SampleRow.batch_id == batch_id)
            )
            doubled = session.scalar(
                select(func.count()).select_from(
                    select(VerdictRow.item_id, VerdictRow.dimension)
                    .where(VerdictRow.batch_id == batch_id)
                    .group_by(VerdictRow.item_id, VerdictRow.dimension)
                    .having(func.count() > 1)
                    .subquery()
                )
            )
        calls = int(simulator_stats(stack.simulator)["total"])
        return {
            "run": label,
            "status": status.status.value,
            "cells": status.n_cells,
            "cells_lost": status.n_cells - int(verdicts or 0),
            "cells_doubled": int(doubled or 0),
            "samples_expected": status.n_samples_expected,
            "samples_stored": int(samples or 0),
            "judge_calls": calls,
            "duplicate_calls": calls - int(samples or 0),
            "makespan_s": round(makespan, 1),
            **({} if recovery is None else recovery),
        }


def kill_and_restart(
    app: Celery,
    sessions: Sessions,
    batch_id: str,
    workers: list[ManagedProcess],
    redis_server: ManagedProcess,
) -> dict[str, object]:
    """kill -9 the first worker's process group a quarter of the way in, and measure when the
    tasks it held are judged again; then restart Redis half way through."""
    total = batch_status(sessions, batch_id).n_cells
    wait_for(lambda: batch_status(sessions, batch_id).n_verdicts >= total // 4, 600, "a quarter")
    victim = workers[0]
    node = f"{victim.name}@localhost"
    active = (app.control.inspect(destination=[node], timeout=3).active() or {}).get(node, [])
    # Judge tasks only: the chord callbacks (jury.aggregate_cell) it held carry a cell.
    judging = [t for t in active if t.get("name") == "jury.judge_sample" and len(t["args"]) >= 5]
    held = [_sample_ref(task["args"]) for task in judging]
    os.killpg(victim.process.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    print(f"killed a worker's process group holding {len(held)} tasks", file=sys.stderr)
    wait_for(lambda: _all_stored(sessions, held), 600, "the killed worker's tasks", poll=0.5)
    back_after = time.monotonic() - killed_at
    print(f"its tasks were judged again {back_after:.1f} s after the kill", file=sys.stderr)
    wait_for(lambda: batch_status(sessions, batch_id).n_verdicts >= total // 2, 600, "half")
    redis_server.restart()
    print("restarted Redis", file=sys.stderr)
    return {"killed_worker_held": len(held), "held_tasks_back_after_s": round(back_after, 1)}


def _all_stored(sessions: Sessions, refs: list[SampleRef]) -> bool:
    cells: dict[CellRef, set[tuple[str, int]]] = {}
    for ref in refs:
        cells.setdefault(ref.cell, set()).add((ref.judge, ref.sample))
    stored = samples_of_cells(sessions, list(cells))
    return all(
        wanted <= {(s.judge, s.sample) for s in stored.get(cell, [])}
        for cell, wanted in cells.items()
    )


def _sample_ref(args: list[object]) -> SampleRef:
    """The (item, dimension, judge, sample) a judge task's arguments name."""
    batch_id, item_id, dimension, judge = (str(a) for a in args[:4])
    return SampleRef(batch_id, item_id, dimension, judge, int(str(args[4])))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--latency-ms", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="jury-bench-") as tmp:
        clean = run("clean", Path(tmp) / "clean", args, None)
        faulty = run("faulty", Path(tmp) / "faulty", args, kill_and_restart)
    faulty["recovery_s"] = round(float(faulty["makespan_s"]) - float(clean["makespan_s"]), 1)  # type: ignore[arg-type]
    columns = list(faulty)
    print(f"{'':<26}{'clean':>12}{'faulty':>12}")
    for column in columns[1:]:
        print(f"{column:<26}{clean.get(column, ''):>12}{faulty.get(column, ''):>12}")
    print(
        json.dumps(
            {
                "bench": "faults",
                "heartbeat_timeout_s": Settings().heartbeat_timeout_s,
                "visibility_timeout_s": Settings().visibility_timeout_s,
                "clean": clean,
                "faulty": faulty,
            }
        )
    )


if __name__ == "__main__":
    main()
