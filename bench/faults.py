"""Fault benchmark: the same batch run clean and run through a kill -9 of a worker and a Redis
restart, side by side. Prints cells lost, cells doubled, duplicate judge calls, and how much
longer the faulty run took (the recovery time).

    .venv/bin/python -m bench.faults [--items 40] [--visibility-timeout 10]

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

from sqlalchemy import func, select

from bench.common import local_stack, simulator_stats
from producer.loading import load_batch
from producer.services import ManagedProcess, wait_for
from producer.submission import submit_batch
from store.engine import session_factory
from store.models import SampleRow, VerdictRow
from store.repository import batch_status

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
    label: str, folder: Path, args: argparse.Namespace, faults: Callable[..., None] | None
) -> dict[str, object]:
    with local_stack(
        folder,
        label,
        ["--latency-ms", str(args.latency_ms)],
        args.workers,
        appendonly=True,
        visibility_timeout_s=args.visibility_timeout,
        restore_interval_s=2,
        sweep_interval_s=2,
        worker_concurrency=args.concurrency,
    ) as stack:
        sessions = session_factory(stack.settings.database_url)
        started = time.monotonic()
        batch_id = submit_batch(
            load_batch(write_batch(folder, stack.simulator.url, args.items)), sessions, stack.app
        )
        if faults is not None:
            faults(sessions, batch_id, stack.workers, stack.redis)
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
        calls = int(simulator_stats(stack.simulator)["total"])  # type: ignore[call-overload]
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
        }


def kill_and_restart(
    sessions: object, batch_id: str, workers: list[ManagedProcess], redis_server: ManagedProcess
) -> None:
    total = batch_status(sessions, batch_id).n_cells  # type: ignore[arg-type]
    wait_for(
        lambda: batch_status(sessions, batch_id).n_verdicts >= total // 4,  # type: ignore[arg-type]
        600,
        "a quarter of the verdicts",
    )
    os.kill(workers[0].process.pid, signal.SIGKILL)
    print("killed a worker with SIGKILL", file=sys.stderr)
    wait_for(
        lambda: batch_status(sessions, batch_id).n_verdicts >= total // 2,  # type: ignore[arg-type]
        600,
        "half of the verdicts",
    )
    redis_server.restart()
    print("restarted Redis", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency-ms", type=int, default=300)
    parser.add_argument("--visibility-timeout", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="jury-bench-") as tmp:
        clean = run("clean", Path(tmp) / "clean", args, None)
        faulty = run("faulty", Path(tmp) / "faulty", args, kill_and_restart)
    faulty["recovery_s"] = round(float(faulty["makespan_s"]) - float(clean["makespan_s"]), 1)  # type: ignore[arg-type]
    columns = list(faulty)
    print(f"{'':<18}{'clean':>12}{'faulty':>12}")
    for column in columns[1:]:
        print(f"{column:<18}{clean.get(column, ''):>12}{faulty.get(column, ''):>12}")
    print(
        json.dumps(
            {
                "bench": "faults",
                "visibility_timeout_s": args.visibility_timeout,
                "clean": clean,
                "faulty": faulty,
            }
        )
    )


if __name__ == "__main__":
    main()
