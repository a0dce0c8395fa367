"""Throughput and overhead: a large batch against a zero-latency, unlimited simulator.

Runs, side by side in one run:
  publish   `jury submit` of the large batch with no worker and no bound: the producer's rate
  jury-N    the batch end to end (producer, workers, store), bounded queues (back-pressure)
  jury-N-metrics  the same with the workers' metrics on, each worker scraped every 5 s
  jury-n    a smaller batch with the same bound: peak Redis memory follows the bound, not the size
  baseline  one process, asyncio.gather with a semaphore, calling LiteLLM for the same judgments
  floor     the bare transport: one process, an aiohttp POST and a JSON parse per judgment
            (bench.transport_floor); jury's CPU per judgment is printed as a multiple of it
  recording a call's metrics recorded, on against off, timed in this process (bench.metrics_cost)

and prints judgments per second, CPU milliseconds per judgment per process kind, peak Redis
memory and peak worker RSS: a table for people and one JSON line for machines.

    python -m bench.throughput [--judgments 100000] [--small 20000] [--workers 2]
        [--runs publish,jury,jury-metrics,jury-small,baseline,floor,recording] [--repeat 1]

With `--repeat N`, the runs are made N times in turn, and each jury run is paired with the
baseline run of its round: the table then also gives each pair's ratios (jury's CPU per
judgment over all its processes / the baseline's; jury's judgments a second / the
baseline's) and their median. On a shared machine one pair's ratio varies by more than the
differences worth knowing; the median of several pairs, made in turn, does less. Each jury-N
run is paired with the jury-N-metrics run of its round the same way: the workers' CPU per
judgment with metrics on over off (the target: at most 1.03).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import redis

from bench.asyncio_baseline import DIMENSIONS, JUDGES, run_baseline_child
from bench.common import figure, local_stack, print_runs, worker_env
from bench.metrics_cost import (
    METRICS_LABEL,
    Scraper,
    free_port_range,
    metrics_pairs,
    print_metrics_pairs,
    recording_cost,
)
from bench.transport_floor import floor_multiples, run_floor
from jury.local.services import wait_for
from jury.store.engine import session_factory
from jury.store.repository import batch_status

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
SAMPLES = 3
JURY = [sys.executable, "-c", "from jury.cli.main import main; main()"]
PER_ITEM = len(JUDGES) * len(DIMENSIONS) * SAMPLES
SIMULATOR = ["--latency-ms", "0", "--latency-sigma", "0"]
BASELINE_LABEL = "asyncio baseline"


def write_batch(folder: Path, api_base: str, judgments: int) -> tuple[Path, int]:
    """A batch of at least `judgments` judge calls; returns its path and the exact count."""
    n_items = -(-judgments // PER_ITEM)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "items.jsonl").open("w") as out:
        for n in range(n_items):
            item = {"id": f"i{n:06d}", "input": f"Question {n}?", "output": f"Answer {n}."}
            out.write(json.dumps(item) + "\n")
    judges = ",".join(
        f"{{model: openai/{j}, n: {SAMPLES}, api_base: '{api_base}'}}" for j in JUDGES
    )
    batch = folder / "batch.yaml"
    batch.write_text(
        f"name: throughput\njudges: [{judges}]\ndimensions: [{', '.join(DIMENSIONS)}]\n"
        "items: items.jsonl\n"
    )
    return batch, n_items * PER_ITEM


class Peaks(threading.Thread):
    """Samples Redis memory and worker RSS every half second."""

    def __init__(self, redis_url: str, pids: list[int]) -> None:
        super().__init__(daemon=True)
        self.client = redis.Redis.from_url(redis_url)
        self.processes = [psutil.Process(pid) for pid in pids]
        self.base_memory = int(self.client.info("memory")["used_memory"])
        self.redis_bytes = 0
        self.rss_bytes = 0
        self.rss_series: list[int] = []  # summed over the workers, every half second
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(0.5):
            used = int(self.client.info("memory")["used_memory"]) - self.base_memory
            self.redis_bytes = max(self.redis_bytes, used)
            total = 0
            for process in self.processes:
                tree = [process, *process.children(recursive=True)]
                rss = sum(p.memory_info().rss for p in tree)
                self.rss_bytes = max(self.rss_bytes, rss)
                total += rss
            self.rss_series.append(total)

    def rss_drift_mb(self) -> float:
        """Mean worker RSS in the last tenth of the run minus that in the second tenth: how
        much the workers grew once warmed up (flat: about zero)."""
        series = self.rss_series
        tenth = max(1, len(series) // 10)
        early, late = series[tenth : 2 * tenth] or series, series[-tenth:]
        per_worker = max(1, len(self.processes))
        return (sum(late) / len(late) - sum(early) / len(early)) / 2**20 / per_worker


def cpu_seconds(pid: int) -> float:
    process = psutil.Process(pid)
    total = 0.0
    for p in [process, *process.children(recursive=True)]:
        times = p.cpu_times()
        total += times.user + times.system
    return total


def redis_commands(url: str) -> int:
    """Commands Redis has run since it started (INFO commandstats): a count, not a time, so
    it does not vary with the machine's load."""
    stats = redis.Redis.from_url(url).info("commandstats")
    return sum(int(entry["calls"]) for entry in stats.values())


def run_producer(env: dict[str, str], batch: Path, batch_id: str, cwd: Path) -> dict[str, float]:
    """`jury submit` as its own process; its wall time and CPU seconds (from wait4)."""
    started = time.monotonic()
    command = [*JURY, "submit", str(batch), "--batch-id", batch_id]
    process = subprocess.Popen([*command, "--quiet"], env=env, cwd=cwd)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"jury submit failed with exit code {process.returncode}")
    return {"wall_s": time.monotonic() - started, "cpu_s": usage.ru_utime + usage.ru_stime}


def run_publish_only(folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    with local_stack(folder, "publish", SIMULATOR, 0, max_queued_tasks=10**9) as stack:
        batch, judgments = write_batch(folder, stack.simulator.url, args.judgments)
        producer = run_producer(worker_env(stack.settings), batch, "publish", folder)
        queued = sum(
            redis.Redis.from_url(stack.settings.broker_url).llen(q)
            for q in stack.settings.all_queues
        )
        assert queued == judgments, (queued, judgments)
        return {
            "run": "publish",
            "judgments": judgments,
            "wall_s": round(producer["wall_s"], 2),
            "publish_per_s": round(judgments / producer["wall_s"]),
            "cpu_ms": {"producer": round(1000 * producer["cpu_s"] / judgments, 3)},
        }


def run_jury(
    folder: Path,
    label: str,
    judgments_wanted: int,
    args: argparse.Namespace,
    metrics: bool = False,
) -> Any:
    options: dict[str, Any] = {
        "max_queued_tasks": args.max_queued,
        "worker_concurrency": args.concurrency,
        "sweep_interval_s": 30.0,
    }
    if metrics:  # each worker takes the first free port of the range
        options["metrics_port"] = free_port_range(args.workers)
    with local_stack(folder, label, SIMULATOR, args.workers, **options) as stack:
        batch, judgments = write_batch(folder, stack.simulator.url, judgments_wanted)
        scraper = Scraper(stack.settings.metrics_ports) if metrics else None
        if scraper is not None:
            scraper.start()
        pids = [w.process.pid for w in stack.workers]
        peaks = Peaks(stack.settings.broker_url, pids)
        cpu_before = {pid: cpu_seconds(pid) for pid in pids}
        simulator_before = cpu_seconds(stack.simulator.process.pid)
        redis_before = cpu_seconds(stack.redis.process.pid)
        commands_before = redis_commands(stack.settings.broker_url)
        peaks.start()
        started = time.monotonic()
        producer = run_producer(worker_env(stack.settings), batch, label, folder)
        sessions = session_factory(stack.settings.database_url)
        wait_for(lambda: batch_status(sessions, label).status.finished, 3600, "the batch", 0.5)
        wall = time.monotonic() - started
        peaks.stopped.set()
        status = batch_status(sessions, label)
        workers_cpu = sum(cpu_seconds(pid) - cpu_before[pid] for pid in pids)
        commands = redis_commands(stack.settings.broker_url) - commands_before
        per = 1000 / judgments
        scraped: dict[str, Any] = {}
        if scraper is not None:
            scraper.stopped.set()
            calls = scraper.calls()
            scraped = {
                "calls_per_judgment": round(calls / judgments, 3),
                "scrapes": scraper.scrapes,
            }
        return {
            **scraped,
            "run": label,
            "judgments": judgments,
            "wall_s": round(wall, 1),
            "judgments_per_s": round(judgments / wall),
            "samples_stored": status.n_samples,
            "failed": status.n_failed_samples,
            "redis_commands_per_judgment": round(commands / judgments, 2),
            "cpu_ms": {
                "producer": round(producer["cpu_s"] * per, 3),
                "workers": round(workers_cpu * per, 3),
                "redis": round((cpu_seconds(stack.redis.process.pid) - redis_before) * per, 3),
                "simulator (not jury)": round(
                    (cpu_seconds(stack.simulator.process.pid) - simulator_before) * per, 3
                ),
            },
            "peak_redis_mb": round(peaks.redis_bytes / 2**20, 1),
            "peak_worker_rss_mb": round(peaks.rss_bytes / 2**20, 1),
            "worker_rss_drift_mb": round(peaks.rss_drift_mb(), 1),
            "redis_keys_left": redis.Redis.from_url(stack.settings.broker_url).dbsize(),
        }


def run_baseline(folder: Path, judgments: int, args: argparse.Namespace) -> dict[str, Any]:
    with local_stack(folder, "baseline", SIMULATOR, 0) as stack:
        simulator_before = cpu_seconds(stack.simulator.process.pid)
        baseline = run_baseline_child(stack.simulator.url, judgments, args.baseline_concurrency)
        simulator_cpu = cpu_seconds(stack.simulator.process.pid) - simulator_before
        per = 1000 / judgments
        return {
            "run": BASELINE_LABEL,
            "judgments": judgments,
            "wall_s": round(baseline.wall_s, 1),
            "judgments_per_s": round(judgments / baseline.wall_s),
            "cpu_ms": {
                "baseline process": round(baseline.cpu_s * per, 3),
                AFTER_ITS_IMPORTS: round(baseline.calls_cpu_s * per, 3),
                "simulator (not jury)": round(simulator_cpu * per, 3),
            },
            "peak_worker_rss_mb": round(baseline.peak_rss / 2**20, 1),
        }


def print_table(rows: list[dict[str, Any]]) -> None:
    kinds = sorted({kind for row in rows for kind in row.get("cpu_ms", {})})
    columns = ["judgments", "wall_s", "publish_per_s", "judgments_per_s"]
    columns += ["peak_redis_mb", "peak_worker_rss_mb", "worker_rss_drift_mb", "redis_keys_left"]
    columns += ["redis_commands_per_judgment"]
    lines = [(column, figure(column)) for column in columns]
    lines += [(f"cpu ms/judgment {kind}", _cpu(kind)) for kind in kinds]
    print_runs(rows, "run", lines, width=20)


def _cpu(kind: str) -> Callable[[dict[str, Any]], object]:
    return lambda row: row.get("cpu_ms", {}).get(kind, "-")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judgments", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=20_000, help="the second, smaller batch")
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument(
        "--concurrency", type=int, default=256, help="tasks in flight per worker (its default)"
    )
    parser.add_argument("--max-queued", type=int, default=10_000, help="JURY_MAX_QUEUED")
    parser.add_argument("--baseline-concurrency", type=int, default=64)
    parser.add_argument(
        "--runs", default="publish,jury,jury-metrics,jury-small,baseline,floor,recording"
    )
    parser.add_argument("--repeat", type=int, default=1, help="make the runs this many times")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="jury-throughput-") as tmp:
        for round_ in range(args.repeat):
            for run in args.runs.split(","):
                folder = Path(tmp) / f"{run}-{round_}"
                if run == "publish":
                    rows.append(run_publish_only(folder, args))
                elif run == "jury":
                    rows.append(run_jury(folder, f"jury-{args.judgments}", args.judgments, args))
                elif run == "jury-metrics":
                    label = f"jury-{args.judgments}{METRICS_LABEL}"
                    rows.append(run_jury(folder, label, args.judgments, args, metrics=True))
                elif run == "recording":
                    rows.append({"run": "recording", **recording_cost()})
                elif run == "jury-small":
                    rows.append(run_jury(folder, f"jury-{args.small}", args.small, args))
                elif run == "baseline":
                    rows.append(run_baseline(folder, args.judgments, args))
                elif run == "floor":
                    with local_stack(folder, "floor", SIMULATOR, 0) as stack:
                        calls, at_once = args.judgments, args.baseline_concurrency
                        rows.append(run_floor(stack.simulator.url, calls, at_once))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print_table(rows)
    pairs = pair_ratios(rows, f"jury-{args.judgments}")
    summary: dict[str, Any] = {"bench": "throughput", "workers": args.workers, "runs": rows}
    if pairs:
        median = {key: statistics.median(p[key] for p in pairs) for key in pairs[0]}
        print_pairs(pairs, median)
        summary["pairs"] = pairs
        summary["median"] = median
    summary.update(metrics_summary(rows, f"jury-{args.judgments}"))
    if multiples := floor_multiples(rows, jury_cpu_ms):
        summary["floor_multiples"] = multiples
    print(json.dumps(summary))


def metrics_summary(rows: list[dict[str, Any]], plain: str) -> dict[str, Any]:
    """Metrics on against off: the pairs' ratios, and the recording's own cost as a share of
    a worker's CPU per judgment (at the calls per judgment the metrics run counted)."""
    pairs = metrics_pairs(rows, plain)
    cost = next((dict(r) for r in rows if r["run"] == "recording"), None)
    plain_cpu = [r["cpu_ms"]["workers"] for r in rows if r["run"] == plain]
    calls = [r["calls_per_judgment"] for r in rows if "calls_per_judgment" in r]
    if cost and plain_cpu and calls:
        per_judgment_us = cost["recording_us_per_call"] * statistics.median(calls)
        share = 100 * per_judgment_us / (1000 * statistics.median(plain_cpu))
        cost["share_of_judgment_pct"] = round(share, 3)
    if not pairs and not cost:
        return {}
    print_metrics_pairs(pairs, cost)
    summary: dict[str, Any] = {"metrics_pairs": pairs, "metrics_recording": cost}
    if pairs:
        summary["metrics_median_cpu_ratio"] = statistics.median(
            p["workers_cpu_ratio"] for p in pairs
        )
    return summary


# The baseline's CPU without its process' start (`import litellm`): jury's workers start before.
AFTER_ITS_IMPORTS = "baseline, after its imports"


def jury_cpu_ms(row: dict[str, Any]) -> float:
    """CPU per judgment over every jury process (the simulator is not jury's)."""
    return sum(v for kind, v in row["cpu_ms"].items() if not kind.startswith("simulator"))


def pair_ratios(rows: list[dict[str, Any]], jury_label: str) -> list[dict[str, float]]:
    """Each jury run with the baseline run that follows it: jury / baseline."""
    pairs, jury = [], None
    for row in rows:
        if row["run"] == jury_label:
            jury = row
        elif row["run"] == BASELINE_LABEL and jury is not None:
            baseline_cpu = row["cpu_ms"]["baseline process"]
            pairs.append(
                {
                    "cpu_ratio": round(jury_cpu_ms(jury) / baseline_cpu, 3),
                    "cpu_ratio_after_imports": round(
                        jury_cpu_ms(jury) / row["cpu_ms"][AFTER_ITS_IMPORTS], 3
                    ),
                    "speed_ratio": round(jury["judgments_per_s"] / row["judgments_per_s"], 3),
                }
            )
            jury = None
    return pairs


def print_pairs(pairs: list[dict[str, float]], median: dict[str, float]) -> None:
    print("\njury / baseline, pair by pair: CPU per judgment (target <= 1.3), judgments a second")
    for n, pair in enumerate(pairs, 1):
        print(f"  pair {n}: " + _ratios(pair))
    print("  median: " + _ratios(median))
    print(
        "  (CPU after imports: against the baseline's calls alone, without its start and "
        "`import litellm`)"
    )


def _ratios(pair: dict[str, float]) -> str:
    return (
        f"CPU {pair['cpu_ratio']:.3f}  CPU after imports {pair['cpu_ratio_after_imports']:.3f}"
        f"  speed {pair['speed_ratio']:.3f}"
    )


if __name__ == "__main__":
    main()
