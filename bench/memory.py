"""Memory of a whole run: peak PSS and RSS of every process (workers, producer, Redis) and of
their sum, for two workloads and two worker layouts, side by side in one invocation.

Workloads:
  zero-latency   3 judges x 2 criteria x 3 samples over ~3,000 judgments, against a simulator
                 that answers at once and limits nothing (bench/throughput's kind of batch)
  strict-quota   bench/ratelimit's batch: quotas of 1200, 600 and 300 requests a minute with a
                 one-second bucket (`--rate-window 1`), answers in ~400 ms

Layouts (runs):
  separate       two `jury worker` processes, each loading LiteLLM for itself (the old layout)
  forked         one `jury worker --processes 2`: a parent that loads it once and two forked
                 worker processes sharing its pages (jury.worker.supervisor)
  baseline       the plain asyncio LiteLLM script of bench/asyncio_baseline, zero-latency
                 workload only (one process, no Redis, no store)

Each process is sampled every SAMPLE_S seconds from /proc/PID/smaps_rollup: RSS counts every
page a process maps; PSS divides a page shared by k processes by k, so that the PSS of
processes add up to the memory they use together. "total" is the largest sum over one
sample, the run's peak; a process's own peak may come at another moment. The simulator
stands in for a provider and is not counted.

    .venv/bin/python -m bench.memory [--judgments 3000] [--minutes 0.5]
        [--runs separate,forked,baseline] [--workloads zero-latency,strict-quota]

Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil

from bench.common import print_runs
from bench.ratelimit import DIMENSIONS, LATENCY, MODELS, plan
from bench.ratelimit import write_batch as write_quota_batch
from jury.local.services import (
    ManagedProcess,
    start_embedded_redis,
    start_simulator,
    start_worker,
    wait_for,
)
from jury.producer.publishing import create_producer_app
from jury.settings import Settings
from jury.store.engine import session_factory
from jury.store.repository import batch_status

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("JURY_EGRESS_ALLOW", "loopback")
SAMPLE_S = 0.25
JUDGES = ["balanced", "lenient", "strict"]
CRITERIA = ["relevance", "accuracy"]
SAMPLES = 3
JURY = [sys.executable, "-c", "from jury.cli.main import main; main()"]
ZERO_LATENCY = ["--latency-ms", "0", "--latency-sigma", "0"]
MB = 2**20
ROOT = Path(__file__).resolve().parents[1]


def smaps(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of one process in bytes, from the kernel's summary of its mappings."""
    rss = pss = 0
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        for line in rollup:
            if line.startswith("Rss:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("Pss:"):
                pss = int(line.split()[1]) * 1024
    return rss, pss


class Sampler(threading.Thread):
    """Peak RSS and PSS per named process (a worker's children are found as they come and
    go) and of the sum over each sample."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.roots: dict[str, int] = {}  # name -> pid whose children are sampled too
        self.peaks: dict[str, dict[str, int]] = {}
        self.total = {"rss": 0, "pss": 0}
        self.lock = threading.Lock()
        self.stopped = threading.Event()

    def watch(self, name: str, pid: int) -> None:
        with self.lock:
            self.roots[name] = pid

    def run(self) -> None:
        while not self.stopped.wait(SAMPLE_S):
            self.sample()

    def sample(self) -> None:
        with self.lock:
            roots = dict(self.roots)
        rss_sum = pss_sum = 0
        for name, pid in roots.items():
            for label, member in self._members(name, pid):
                try:
                    rss, pss = smaps(member)
                except OSError:  # gone between the listing and the read
                    continue
                peak = self.peaks.setdefault(label, {"rss": 0, "pss": 0})
                peak["rss"], peak["pss"] = max(peak["rss"], rss), max(peak["pss"], pss)
                rss_sum += rss
                pss_sum += pss
        self.total = {
            "rss": max(self.total["rss"], rss_sum),
            "pss": max(self.total["pss"], pss_sum),
        }

    @staticmethod
    def _members(name: str, pid: int) -> Iterator[tuple[str, int]]:
        try:
            children = psutil.Process(pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return
        yield (f"{name} (parent)" if children and name.startswith("worker") else name), pid
        for n, child in enumerate(children, 1):
            yield f"{name}.{n}", child.pid

    def figures(self) -> dict[str, Any]:
        per = {k: {m: round(v / MB, 1) for m, v in p.items()} for k, p in self.peaks.items()}
        return {
            "processes": per,
            "total_rss_mb": round(self.total["rss"] / MB, 1),
            "total_pss_mb": round(self.total["pss"] / MB, 1),
        }


def zero_latency_batch(folder: Path, api_base: str, judgments: int) -> tuple[Path, int]:
    per_item = len(JUDGES) * len(CRITERIA) * SAMPLES
    items = -(-judgments // per_item)
    (folder / "items.jsonl").write_text(
        "".join(
            json.dumps({"id": f"i{n:05d}", "input": f"Question {n}?", "output": f"Answer {n}."})
            + "\n"
            for n in range(items)
        )
    )
    judges = ",".join(
        f"{{model: openai/{j}, n: {SAMPLES}, api_base: '{api_base}'}}" for j in JUDGES
    )
    path = folder / "batch.yaml"
    path.write_text(
        f"name: memory\njudges: [{judges}]\ndimensions: [{', '.join(CRITERIA)}]\n"
        "items: items.jsonl\n"
    )
    return path, items * per_item


def quota_options() -> list[str]:
    limits = [arg for m, rpm in MODELS.items() for arg in ("--model-rpm", f"{m}={rpm}")]
    return [*LATENCY, *limits, "--rate-window", "1"]


@contextmanager
def services(folder: Path, simulator_options: list[str]) -> Iterator[tuple[Settings, Any, Any]]:
    folder.mkdir(parents=True, exist_ok=True)
    redis_server = start_embedded_redis(folder)
    simulator = start_simulator(folder, simulator_options)
    settings = Settings.model_validate(
        {
            "broker_url": redis_server.url,
            "database_url": f"sqlite:///{folder / 'jury.db'}",
            "queue": f"bench-{secrets.token_hex(3)}",
            "egress_allow": "loopback",
        }
    )
    try:
        yield settings, redis_server, simulator
    finally:
        simulator.stop()
        redis_server.stop()


def start_layout(folder: Path, settings: Settings, layout: str) -> list[ManagedProcess]:
    """The workers of a layout, once every worker process answers a ping."""
    env = {**os.environ, **settings.to_env()}
    if layout == "forked":
        node = f"bench-forked-{secrets.token_hex(2)}@localhost"
        workers = [start_worker(folder, env, node, extra=["--processes", "2"])]
        nodes = [node.replace("@", "-1@"), node.replace("@", "-2@")]
    else:
        nodes = [f"bench-separate-{n}-{secrets.token_hex(2)}@localhost" for n in range(2)]
        workers = [start_worker(folder, env, node) for node in nodes]
    app = create_producer_app(settings)

    def ready() -> bool:
        if not all(w.alive() for w in workers):
            raise SystemExit("a worker died:\n" + "\n".join(w.log_tail() for w in workers))
        return len(app.control.ping(destination=nodes, timeout=0.5)) == len(nodes)

    wait_for(ready, 300, "the workers", poll=0.3)
    return workers


def run_jury(folder: Path, workload: str, layout: str, args: argparse.Namespace) -> dict[str, Any]:
    options = ZERO_LATENCY if workload == "zero-latency" else quota_options()
    with services(folder, options) as (settings, redis_server, simulator):
        if workload == "zero-latency":
            batch, judgments = zero_latency_batch(folder, simulator.url, args.judgments)
        else:
            items, n = plan(args.minutes)
            batch = write_quota_batch(folder, simulator.url, items, n)
            judgments = items * len(DIMENSIONS) * sum(n.values())
        workers = start_layout(folder, settings, layout)
        sampler = Sampler()
        sampler.watch("redis", redis_server.process.pid)
        for number, worker in enumerate(workers, 1):
            sampler.watch(f"worker{number}", worker.process.pid)
        sampler.sample()
        idle = sampler.figures()["total_pss_mb"]
        sampler.start()
        started = time.monotonic()
        try:
            env = {**os.environ, **settings.to_env()}
            batch_id = f"memory-{secrets.token_hex(3)}"
            command = [*JURY, "submit", str(batch), "--batch-id", batch_id, "--quiet"]
            producer = subprocess.Popen(command, env=env, cwd=folder, stdout=subprocess.DEVNULL)
            sampler.watch("producer", producer.pid)
            if producer.wait() != 0:
                raise SystemExit(f"jury submit failed with exit code {producer.returncode}")
            sessions = session_factory(settings.database_url)
            wait_for(lambda: batch_status(sessions, batch_id).status.finished, 3600, "the batch")
            wall = time.monotonic() - started
            status = batch_status(sessions, batch_id)
        finally:
            sampler.stopped.set()
            sampler.join()
            for worker in workers:
                worker.stop()
        return {
            "run": f"{layout} {workload}",
            "layout": layout,
            "workload": workload,
            "judgments": judgments,
            "samples_stored": status.n_samples,
            "wall_s": round(wall, 1),
            "idle_workers_and_redis_pss_mb": idle,
            **sampler.figures(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        }


def run_baseline(folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    with services(folder, ZERO_LATENCY) as (_, _redis, simulator):
        sampler = Sampler()
        started = time.monotonic()
        command = [
            sys.executable,
            "-m",
            "bench.asyncio_baseline",
            simulator.url,
            "--judgments",
            str(args.judgments),
            "--concurrency",
            "64",
        ]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, cwd=ROOT)
        sampler.watch("baseline", process.pid)
        sampler.start()
        process.wait()
        sampler.stopped.set()
        sampler.join()
        if process.returncode != 0:
            raise SystemExit(f"the asyncio baseline failed with exit code {process.returncode}")
        return {
            "run": "baseline zero-latency",
            "layout": "baseline",
            "workload": "zero-latency",
            "judgments": args.judgments,
            "wall_s": round(time.monotonic() - started, 1),
            **sampler.figures(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        }


def print_table(rows: list[dict[str, Any]]) -> None:
    names = sorted({name for row in rows for name in row["processes"]}, key=_process_order)
    lines: list[tuple[str, Any]] = [
        ("judgments", lambda r: r["judgments"]),
        ("wall_s", lambda r: r["wall_s"]),
        ("TOTAL peak PSS MB", lambda r: r["total_pss_mb"]),
        ("TOTAL peak RSS MB", lambda r: r["total_rss_mb"]),
        ("idle workers+redis PSS", lambda r: r.get("idle_workers_and_redis_pss_mb", "-")),
    ]
    for name in names:
        lines.append((f"{name} PSS / RSS", _pair(name)))
    lines.append(("load average (1 min)", lambda r: r["load_average"][0]))
    print_runs(rows, "run", lines, label_width=26, width=24)


def _pair(name: str) -> Any:
    def read(row: dict[str, Any]) -> str:
        peak = row["processes"].get(name)
        return f"{peak['pss']:.0f} / {peak['rss']:.0f}" if peak else "-"

    return read


def _process_order(name: str) -> tuple[int, str]:
    order = ["worker", "producer", "redis", "baseline"]
    return next((i for i, prefix in enumerate(order) if name.startswith(prefix)), 9), name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judgments", type=int, default=3000)
    parser.add_argument("--minutes", type=float, default=0.5, help="strict-quota makespan")
    parser.add_argument("--runs", default="separate,forked,baseline")
    parser.add_argument("--workloads", default="zero-latency,strict-quota")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="jury-memory-") as tmp:
        for workload in args.workloads.split(","):
            for layout in args.runs.split(","):
                folder = Path(tmp) / f"{layout}-{workload}"
                if layout == "baseline":
                    if workload != "zero-latency":
                        continue
                    rows.append(run_baseline(folder, args))
                else:
                    rows.append(run_jury(folder, workload, layout, args))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print_table(rows)
    print(json.dumps({"bench": "memory", "runs": rows}))


if __name__ == "__main__":
    main()
