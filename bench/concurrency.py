"""Calls in flight: one worker process against a judge that answers in 2 s.

A worker's engine (jury.worker.engine.pool) holds each judge task as a coroutine on its event loop,
so one process can wait on hundreds of calls at once. Against a simulator answering every call
in `--latency-ms`, one worker with `--concurrency` tasks in flight should reach
concurrency / latency judgments a second, with the simulator counting the calls it answers at
once. Side by side, in the same run: Celery's `threads` pool with the previous default (64
threads), the way jury's workers ran before the engine; and bench/throughput's plain-asyncio
LiteLLM script alone with the engine's concurrency, the ceiling of one process calling
through LiteLLM.

Prints a table and one JSON line.

    python -m bench.concurrency [--judgments 6000] [--concurrency 512] [--latency-ms 2000]
        [--runs engine,threads,litellm]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from bench.asyncio_baseline import run_baseline_child
from bench.common import figure, local_stack, print_runs, simulator_stats
from bench.scaling import write_batch
from bench.throughput import cpu_seconds
from jury.batchfile.loading import load_batch
from jury.local.services import wait_for
from jury.producer.submission import submit_batch
from jury.store.engine import session_factory
from jury.store.repository import batch_status


def run(folder: Path, pool: str, concurrency: int, args: argparse.Namespace) -> dict[str, Any]:
    simulator = ["--latency-ms", str(args.latency_ms), "--latency-sigma", "0"]
    with local_stack(
        folder, pool, simulator, 1, worker_concurrency=concurrency, worker_pool=pool
    ) as stack:
        batch, judgments = write_batch(folder, stack.simulator.url, args.judgments)
        sessions = session_factory(stack.settings.database_url)
        worker = psutil.Process(stack.workers[0].process.pid)
        peak_rss = 0
        done = threading.Event()

        def watch_memory() -> None:
            nonlocal peak_rss
            while not done.wait(0.5):
                peak_rss = max(peak_rss, worker.memory_info().rss)

        watcher = threading.Thread(target=watch_memory, daemon=True)
        watcher.start()
        cpu_before = cpu_seconds(worker.pid)
        started = time.monotonic()
        batch_id = submit_batch(load_batch(batch), sessions, stack.app)
        wait_for(lambda: batch_status(sessions, batch_id).status.finished, 3600, "the batch", 0.5)
        makespan = time.monotonic() - started
        done.set()
        cpu = cpu_seconds(worker.pid) - cpu_before
        stats = simulator_stats(stack.simulator)
        status = batch_status(sessions, batch_id)
        return {
            "run": f"{pool} × {concurrency}",
            "judgments": judgments,
            "failed": status.n_failed_samples,
            "wall_s": round(makespan, 1),
            "judgments_per_s": round(judgments / makespan, 1),
            "max_in_flight": stats["max_in_flight"],
            "bound_per_s": round(concurrency / (args.latency_ms / 1000), 1),
            "peak_rss_mb": round(peak_rss / 2**20, 1),
            "cpu_ms_per_judgment": round(1000 * cpu / judgments, 2),
        }


def run_litellm_alone(folder: Path, concurrency: int, args: argparse.Namespace) -> dict[str, Any]:
    """The ceiling of one process calling through LiteLLM: bench/throughput's plain-asyncio
    script (no Celery, no store) against the same simulator, `concurrency` calls at once."""
    simulator = ["--latency-ms", str(args.latency_ms), "--latency-sigma", "0"]
    with local_stack(folder, "litellm", simulator, 0) as stack:
        baseline = run_baseline_child(stack.simulator.url, args.judgments, concurrency)
        stats = simulator_stats(stack.simulator)
    # After its imports, like the engine's run (a worker started before the batch); the
    # whole process (`import litellm` is seconds of CPU) apart.
    return {
        "run": f"LiteLLM alone × {concurrency}",
        "judgments": args.judgments,
        "failed": 0,  # the script exits non-zero on any failed call
        "wall_s": round(baseline.calls_wall_s, 1),
        "judgments_per_s": round(args.judgments / baseline.calls_wall_s, 1),
        "max_in_flight": stats["max_in_flight"],
        "bound_per_s": round(concurrency / (args.latency_ms / 1000), 1),
        "peak_rss_mb": round(baseline.peak_rss / 2**20, 1),
        "cpu_ms_per_judgment": round(1000 * baseline.calls_cpu_s / args.judgments, 2),
        "with_process_start": {
            "wall_s": round(baseline.wall_s, 1),
            "cpu_ms_per_judgment": round(1000 * baseline.cpu_s / args.judgments, 2),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judgments", type=int, default=6000)
    parser.add_argument("--concurrency", type=int, default=512, help="engine tasks in flight")
    parser.add_argument("--latency-ms", type=int, default=2000)
    parser.add_argument("--baseline-threads", type=int, default=64)
    parser.add_argument(
        "--runs",
        default="engine,threads,litellm",
        help="engine, threads (Celery's pool), litellm (the plain-asyncio script alone)",
    )
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="jury-concurrency-") as tmp:
        for pool in args.runs.split(","):
            if pool == "litellm":
                rows.append(run_litellm_alone(Path(tmp) / pool, args.concurrency, args))
                continue
            concurrency = args.concurrency if pool == "engine" else args.baseline_threads
            rows.append(run(Path(tmp) / pool, pool, concurrency, args))
    lines = [(column, figure(column)) for column in list(rows[0])[1:]]
    print_runs(rows, "run", lines, label_width=22, width=18)
    print(
        json.dumps(
            {"bench": "concurrency", "latency_ms": args.latency_ms, "runs": rows},
        )
    )


if __name__ == "__main__":
    main()
