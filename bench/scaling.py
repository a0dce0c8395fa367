"""Horizontal scaling: the same latency-bound batch, no rate limit, with 1, 2 and 4 workers.

Each worker process runs `--concurrency` threads; every judge call takes `--latency-ms` at the
simulator, so one worker can do at most concurrency / latency judgments a second. Throughput
should grow with the number of workers until the machine's CPU (or the provider) is the limit.
Prints a table for people and one JSON line for machines.

    python -m bench.scaling [--workers 1,2,4] [--judgments 3000] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from bench.common import figure, local_stack, print_runs
from bench.throughput import cpu_seconds
from jury.batchfile.loading import load_batch
from jury.local.services import wait_for
from jury.producer.submission import submit_batch
from jury.store.engine import session_factory
from jury.store.repository import batch_status

JUDGES = ["balanced", "lenient", "strict"]


def write_batch(folder: Path, api_base: str, judgments: int) -> tuple[Path, int]:
    n_items = -(-judgments // len(JUDGES))
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "items.jsonl").open("w") as out:
        for n in range(n_items):
            out.write(json.dumps({"id": f"i{n:05d}", "output": f"Answer {n}."}) + "\n")
    judges = ",".join(f"{{model: openai/{j}, n: 1, api_base: '{api_base}'}}" for j in JUDGES)
    batch = folder / "batch.yaml"
    batch.write_text(
        f"name: scaling\njudges: [{judges}]\ndimensions: [relevance]\nitems: items.jsonl\n"
    )
    return batch, n_items * len(JUDGES)


def run(folder: Path, workers: int, args: argparse.Namespace) -> dict[str, Any]:
    simulator = ["--latency-ms", str(args.latency_ms), "--latency-sigma", "0.05"]
    options = {"worker_concurrency": args.concurrency}
    with local_stack(folder, f"w{workers}", simulator, workers, **options) as stack:
        batch, judgments = write_batch(folder, stack.simulator.url, args.judgments)
        sessions = session_factory(stack.settings.database_url)
        pids = [w.process.pid for w in stack.workers]
        cpu_before = sum(cpu_seconds(pid) for pid in pids)
        started = time.monotonic()
        batch_id = submit_batch(load_batch(batch), sessions, stack.app)
        wait_for(lambda: batch_status(sessions, batch_id).status.finished, 1800, "the batch", 0.2)
        makespan = time.monotonic() - started
        cpu = sum(cpu_seconds(pid) for pid in pids) - cpu_before
        ceiling = workers * args.concurrency / (args.latency_ms / 1000)
        return {
            "workers": workers,
            "judgments": judgments,
            "makespan_s": round(makespan, 1),
            "judgments_per_s": round(judgments / makespan, 1),
            "latency_bound_per_s": round(ceiling, 1),
            "share_of_bound": round(judgments / makespan / ceiling, 3),
            "worker_cpu_ms_per_judgment": round(1000 * cpu / judgments, 2),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--judgments", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=16, help="threads per worker")
    parser.add_argument("--latency-ms", type=int, default=500)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="jury-scaling-") as tmp:
        for workers in (int(w) for w in args.workers.split(",")):
            rows.append(run(Path(tmp) / f"w{workers}", workers, args))
    base = rows[0]["judgments_per_s"] / rows[0]["workers"]
    for row in rows:
        row["speedup_per_worker"] = round(row["judgments_per_s"] / base / row["workers"], 3)
    lines = [(column, figure(column)) for column in list(rows[0])[1:]]
    print_runs(rows, "workers", lines, label_width=28, width=10)
    print(
        json.dumps(
            {
                "bench": "scaling",
                "latency_ms": args.latency_ms,
                "concurrency": args.concurrency,
                "cpus": psutil.cpu_count(),
                "runs": rows,
            }
        )
    )


if __name__ == "__main__":
    main()
