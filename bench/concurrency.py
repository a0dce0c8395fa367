"""Calls in flight: one worker process against a slow judge, at default settings.

A worker's engine (jury.worker.engine.pool) holds each judge task as a coroutine on its event
loop, and its window (jury.worker.engine.window) grows while calls wait on the network and the
CPU is spare, up to JURY_WORKER_CONCURRENCY. Against a simulator answering every call in
`--latency-ms`, one worker at default settings should hold thousands of calls in flight (the
simulator counts the calls it answers at once) and judge about window / latency a second.
Side by side, in the same run: the same worker with a fixed window (`--fixed`, 256: the
previous default, JURY_WORKER_CONCURRENCY=JURY_WORKER_WINDOW=256); optionally Celery's
`threads` pool (64 threads, how jury's workers ran before the engine) and bench/throughput's
plain-asyncio LiteLLM script alone, `--concurrency` calls at once.

Each run reports the simulator's peak of calls in flight, judgments per second over the whole
batch (submission to the last stored: ramp and tail included) and over its middle (from 20 %
to 80 % stored: the steady rate), the worker's peak window (published with its heartbeat),
peak RSS and PSS, CPU per judgment, and the load average (the machine may be shared).

Prints a table and one JSON line.

    python -m bench.concurrency [--latency-ms 10000] [--judgments N] [--fixed 256]
        [--fixed-judgments N] [--runs adaptive,fixed,threads,litellm] [--concurrency 512]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import redis

from bench.asyncio_baseline import run_baseline_child
from bench.common import figure, local_stack, print_runs, simulator_stats
from bench.scaling import write_batch
from bench.throughput import cpu_seconds
from jury.batchfile.loading import load_batch
from jury.broker import keys as redis_keys
from jury.local.services import wait_for
from jury.producer.submission import submit_batch
from jury.store.engine import session_factory
from jury.store.repository import batch_status

MB = 2**20


class Watch(threading.Thread):
    """Every half second: the worker's RSS and PSS, its published window, and the samples
    stored (for the steady rate)."""

    def __init__(self, pid: int, redis_url: str, windows_key: str, stored: Any) -> None:
        super().__init__(daemon=True)
        self.process = psutil.Process(pid)
        self.redis = redis.Redis.from_url(redis_url)
        self.windows_key, self.stored = windows_key, stored
        self.done = threading.Event()
        self.peak_rss = self.peak_pss = self.peak_window = 0
        self.progress: list[tuple[float, int]] = []

    def run(self) -> None:
        while not self.done.wait(0.5):
            try:
                memory = self.process.memory_full_info()
                self.peak_rss = max(self.peak_rss, memory.rss)
                self.peak_pss = max(self.peak_pss, getattr(memory, "pss", 0))
                for raw in self.redis.hvals(self.windows_key):
                    self.peak_window = max(self.peak_window, int(json.loads(raw)["window"]))
                self.progress.append((time.monotonic(), self.stored()))
            except (psutil.Error, redis.RedisError, ValueError):
                continue

    def steady_per_s(self, total: int) -> float | None:
        """Judgments per second from 20 % to 80 % of `total` stored."""
        low = next((p for p in self.progress if p[1] >= 0.2 * total), None)
        high = next((p for p in self.progress if p[1] >= 0.8 * total), None)
        if low is None or high is None or high[0] <= low[0]:
            return None
        return (high[1] - low[1]) / (high[0] - low[0])


def run(
    folder: Path, label: str, judgments: int, settings: dict[str, Any], args: argparse.Namespace
) -> dict[str, Any]:
    simulator = ["--latency-ms", str(args.latency_ms), "--latency-sigma", "0"]
    pool = settings.get("worker_pool", "engine")
    with local_stack(folder, pool, simulator, 1, **settings) as stack:
        batch, judgments = write_batch(folder, stack.simulator.url, judgments)
        sessions = session_factory(stack.settings.database_url)
        pid = stack.workers[0].process.pid
        batch_id = ""
        watch = Watch(
            pid,
            stack.redis.url,
            redis_keys.windows(stack.settings.queue),  # no key prefix here
            lambda: batch_status(sessions, batch_id).n_samples if batch_id else 0,
        )
        load_before = os.getloadavg()[0]
        cpu_before = cpu_seconds(pid)
        started = time.monotonic()
        batch_id = submit_batch(load_batch(batch), sessions, stack.app)
        watch.start()
        wait_for(lambda: batch_status(sessions, batch_id).status.finished, 3600, "the batch", 0.5)
        makespan = time.monotonic() - started
        watch.done.set()
        watch.join()
        cpu = cpu_seconds(pid) - cpu_before
        stats = simulator_stats(stack.simulator)
        status = batch_status(sessions, batch_id)
        steady = watch.steady_per_s(judgments)
        return {
            "run": label,
            "judgments": judgments,
            "failed": status.n_failed_samples,
            "wall_s": round(makespan, 1),
            "judgments_per_s": round(judgments / makespan, 1),
            "steady_per_s": None if steady is None else round(steady, 1),
            "max_in_flight": stats["max_in_flight"],
            "peak_window": watch.peak_window or "-",
            "peak_rss_mb": round(watch.peak_rss / MB, 1),
            "peak_pss_mb": round(watch.peak_pss / MB, 1),
            "cpu_ms_per_judgment": round(1000 * cpu / judgments, 2),
            "load_1min": f"{load_before:.1f}→{os.getloadavg()[0]:.1f}",
        }


def run_litellm_alone(
    folder: Path, concurrency: int, judgments: int, args: argparse.Namespace
) -> dict[str, Any]:
    """The ceiling of one process calling through LiteLLM: bench/throughput's plain-asyncio
    script (no Celery, no store) against the same simulator, `concurrency` calls at once."""
    simulator = ["--latency-ms", str(args.latency_ms), "--latency-sigma", "0"]
    with local_stack(folder, "litellm", simulator, 0) as stack:
        baseline = run_baseline_child(stack.simulator.url, judgments, concurrency)
        stats = simulator_stats(stack.simulator)
    # After its imports, like the engine's run (a worker started before the batch); the
    # whole process (`import litellm` is seconds of CPU) apart.
    return {
        "run": f"LiteLLM alone × {concurrency}",
        "judgments": judgments,
        "failed": 0,  # the script exits non-zero on any failed call
        "wall_s": round(baseline.calls_wall_s, 1),
        "judgments_per_s": round(judgments / baseline.calls_wall_s, 1),
        "max_in_flight": stats["max_in_flight"],
        "peak_rss_mb": round(baseline.peak_rss / 2**20, 1),
        "cpu_ms_per_judgment": round(1000 * baseline.calls_cpu_s / judgments, 2),
        "load_1min": f"{os.getloadavg()[0]:.1f}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=int, default=10000)
    parser.add_argument(
        "--judgments", type=int, help="for the default worker (default: 2 × latency in ms)"
    )
    parser.add_argument("--fixed", type=int, default=256, help="the fixed window's size")
    parser.add_argument(
        "--fixed-judgments", type=int, help="for the fixed window (default: 3 windows' worth)"
    )
    parser.add_argument("--baseline-threads", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=512, help="the LiteLLM script's")
    parser.add_argument(
        "--runs",
        default="adaptive,fixed",
        help="adaptive (defaults), fixed (a fixed window), threads (Celery's pool), "
        "litellm (the plain-asyncio script alone)",
    )
    parser.add_argument("--keep", type=Path, help="keep the runs' logs in this folder")
    args = parser.parse_args()
    judgments = args.judgments or max(2000, 2 * args.latency_ms)
    fixed_judgments = args.fixed_judgments or 3 * args.fixed
    rows = []
    with tempfile.TemporaryDirectory(prefix="jury-concurrency-") as tmp:
        if args.keep:
            tmp = str(args.keep)
        for name in args.runs.split(","):
            folder = Path(tmp) / name
            if name == "adaptive":
                rows.append(run(folder, "default (adaptive)", judgments, {}, args))
            elif name == "fixed":
                fixed = {"worker_concurrency": args.fixed, "worker_window": args.fixed}
                rows.append(run(folder, f"fixed × {args.fixed}", fixed_judgments, fixed, args))
            elif name == "threads":
                threads = {
                    "worker_pool": "threads",
                    "worker_concurrency": args.baseline_threads,
                    "worker_window": args.baseline_threads,
                }
                label = f"threads × {args.baseline_threads}"
                rows.append(run(folder, label, fixed_judgments, threads, args))
            elif name == "litellm":
                rows.append(run_litellm_alone(folder, args.concurrency, fixed_judgments, args))
            else:
                parser.error(f"no such run: {name}")
    lines = [(column, figure(column)) for column in list(rows[0])[1:]]
    print_runs(rows, "run", lines, label_width=22, width=20)
    print(
        json.dumps(
            {"bench": "concurrency", "latency_ms": args.latency_ms, "runs": rows},
        )
    )


if __name__ == "__main__":
    main()
