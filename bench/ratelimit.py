"""Rate-limit benchmark: three judge models with quotas of 1200, 600 and 300 requests a
minute (answers take ~400 ms), a batch whose ideal duration under those quotas is about a
minute, run by jury with 2 and with 4 worker processes and by a plain-asyncio baseline (one
process, asyncio.gather over every call with a semaphore, LiteLLM, retrying 429s after
Retry-After), side by side.

    .venv/bin/python -m bench.ratelimit [--minutes 1.0] [--rate-window 1] [--hog]

With `--rate-window 1` the provider's bucket holds one second of quota (1200 rpm: 20 calls in
any second), as OpenAI may enforce a per-minute limit per second; `--hog` keeps both cores
busy with another process meanwhile, so calls leave their slots late as on a loaded host (the
simulator, standing in for a provider on other machines, runs at a raised priority where
allowed: the hog slows jury, not the provider's clock).

Prints a table and one JSON line: makespan (from the start of `jury submit`, run as a user
runs it: its start-up counts), ideal makespan, their ratio, per-model utilisation of the
quota, share of calls answered 429, retries; and what the run cost the machine: CPU seconds
and peak PSS of every jury process (workers, the producer, Redis: bench/footprint), CPU per
judgment and Redis commands per judgment. A `jury-N-free` run is the same batch against a
provider without quota: beside each throttled run with as many workers, its CPU per
judgment and the throttled run's multiple of it (default runs: jury-2-free, jury-2,
baseline, jury-4-free, jury-4).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import psutil
from sqlalchemy import func, select

from bench import pyspy
from bench.arrivals import fetch_arrivals, watching_ports, where_quota_went
from bench.asyncio_baseline import plain_call
from bench.common import local_stack, simulator_stats, worker_env
from bench.footprint import Footprint, RedisCommands, wait_cpu_s
from bench.ratelimit_figures import (
    DIMENSIONS,
    LATENCY,
    MODELS,
    plan,
    print_table,
    run_row,
    start_and_end,
    with_unthrottled,
)
from jury.local.services import ManagedProcess, start_simulator, wait_for
from jury.producer.submission import new_batch_id
from jury.settings import Settings
from jury.store.engine import session_factory
from jury.store.models import SampleRow
from jury.store.repository import batch_status

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# `jury submit`, as a user types it: the console script beside this interpreter.
JURY_COMMAND = [str(Path(sys.executable).with_name("jury"))]


def write_batch(
    folder: Path, api_base: str, items: int, n: dict[str, int], quota: bool = True
) -> Path:
    (folder / "items.jsonl").write_text(
        "".join(
            json.dumps({"id": f"i{i}", "input": f"Question {i}?", "output": f"Answer {i}. " * 10})
            + "\n"
            for i in range(items)
        )
    )
    judges = ", ".join(
        f"{{model: 'openai/{m}', n: {n[m]}, "
        + (f"rpm: {MODELS[m]}, " if quota else "")
        + f"api_base: '{api_base}'}}"
        for m in MODELS
    )
    path = folder / "batch.yaml"
    path.write_text(
        f"name: ratelimit\njudges: [{judges}]\ndimensions: {DIMENSIONS}\nitems: items.jsonl\n"
    )
    return path


def as_a_remote_provider(simulator: ManagedProcess) -> None:
    """The simulator stands in for a provider on other machines: the hog must slow jury, not
    the provider's own clock. A starved simulator would read requests sent evenly in bursts,
    and count them so in its one-second window. Raised priority where allowed (root)."""
    with suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, simulator.process.pid, -15)


@contextmanager
def cpu_hog(on: bool) -> Iterator[None]:
    """One busy process per core for the run, as on a machine that does other work."""
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range((psutil.cpu_count() or 1) if on else 0)
    ]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def run_jury(
    folder: Path, workers: int, args: argparse.Namespace, quota: bool = True
) -> dict[str, Any]:
    """A run of jury with `workers` workers; without `quota`, the same batch against a provider
    with no limit (the unthrottled figure its CPU per judgment is set against)."""
    items, n = plan(args.minutes)
    label = f"jury-{workers}w" if quota else f"jury-{workers}w-free"
    with local_stack(
        folder / label,
        label,
        LATENCY + (_limits() if quota else []),
        workers,
        worker_concurrency=args.concurrency,
        rate_horizon_s=args.horizon,
        rate_margin=args.margin,
        ready_timeout_s=args.ready_timeout,
    ) as stack:
        sessions = session_factory(stack.settings.database_url)
        batch = write_batch(folder / label, stack.simulator.url, items, n, quota)
        as_a_remote_provider(stack.simulator)
        provider_port = urllib.parse.urlsplit(stack.simulator.url).port or 80
        processes = {f"worker-{i}": w.process.pid for i, w in enumerate(stack.workers)}
        footprint = Footprint({**processes, "redis": stack.redis.process.pid})
        with (
            cpu_hog(args.hog),
            watching_ports(stack.workers, provider_port) as owners,
            pyspy.recording(args.py_spy, args.profile_dir, label, processes),
        ):
            provider_clock = simulator_stats(stack.simulator)["uptime_s"]
            commands = RedisCommands(stack.redis.url)
            footprint.start()
            # The makespan starts with `jury submit` itself: its start-up counts.
            started = time.monotonic()
            batch_id = new_batch_id()
            submitting = subprocess.Popen(
                [*JURY_COMMAND, "submit", "-q", "--batch-id", batch_id, str(batch)],
                env=worker_env(stack.settings),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            footprint.add("producer", submitting.pid)
            footprint.ended("producer", wait_cpu_s(submitting))
            submitted_s = time.monotonic() - started
            if submitting.returncode != 0:
                assert submitting.stderr is not None
                raise RuntimeError(f"jury submit failed: {submitting.stderr.read().decode()}")
            wait_for(
                lambda: batch_status(sessions, batch_id).status.finished, 1800, "the batch", 0.2
            )
            makespan = time.monotonic() - started
            spent = footprint.stop()
            redis_commands = commands.since()
        stats = simulator_stats(stack.simulator)
        lost = where_quota_went(fetch_arrivals(stack.simulator), owners, workers, provider_clock)
        with sessions() as session:
            retries = session.scalar(
                select(func.coalesce(func.sum(SampleRow.attempts - 1), 0)).where(
                    SampleRow.batch_id == batch_id
                )
            )
            judgments = int(
                session.scalar(
                    select(func.count())
                    .select_from(SampleRow)
                    .where(SampleRow.batch_id == batch_id)
                )
                or 0
            )
        logs = [w.log_tail(10**7) for w in stack.workers]
        deferrals = sum(log.count("parking the task") for log in logs)
        row = run_row(label, makespan, items, n, stats, int(retries or 0), deferrals)
        started_at = start_and_end(stats, provider_clock, makespan)
        # How the judge tasks were shared out (Celery logs each one that ran to its end).
        ran = [len(re.findall(r"judge_sample\[[^]]*\] succeeded", log)) for log in logs]
        return {
            **row,
            "quota": quota,
            "workers": workers,
            "submit_s": round(submitted_s, 2),
            **started_at,
            "tasks_per_worker": ran,
            "quota_lost": lost,
            "judgments": judgments,
            **spent,
            "cpu_ms_per_judgment": (
                round(1000 * spent["cpu_s_total"] / judgments, 2) if judgments else None
            ),
            "redis_commands_per_judgment": (
                round(sum(redis_commands.values()) / judgments, 1) if judgments else None
            ),
            "redis_commands": redis_commands,
        }


# Seconds over which the simulator enforces each quota (--rate-window); see main().
RATE_WINDOW = ["60"]


def _limits() -> list[str]:
    limits = [arg for m, rpm in MODELS.items() for arg in ("--model-rpm", f"{m}={rpm}")]
    return [*limits, "--rate-window", RATE_WINDOW[0]]


async def _baseline_calls(api_base: str, items: int, n: dict[str, int], concurrency: int) -> int:
    import litellm

    semaphore = asyncio.Semaphore(concurrency)
    retries = 0

    async def one(model: str, item: int, dimension: str) -> None:
        nonlocal retries
        prompt = (
            f"Criterion: {dimension}\nScale: 1 to 5\n<data-ab12>\n<output>\nAnswer {item}. "
            f"</output>\n</data-ab12>"
        )
        for _attempt in range(20):
            async with semaphore:
                try:
                    await plain_call(api_base, model, prompt)
                    return
                except litellm.RateLimitError as exc:
                    headers = getattr(exc, "litellm_response_headers", None) or {}
                    wait = float(headers.get("retry-after", 1))
            retries += 1
            await asyncio.sleep(wait + random.random())

    await asyncio.gather(
        *(
            one(m, i, d)
            for m, count in n.items()
            for i in range(items)
            for d in DIMENSIONS
            for _ in range(count)
        )
    )
    return retries


def run_baseline(folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    items, n = plan(args.minutes)
    folder.mkdir(parents=True, exist_ok=True)
    simulator = start_simulator(folder, LATENCY + _limits())
    as_a_remote_provider(simulator)
    try:
        with cpu_hog(args.hog):
            started = time.monotonic()
            calls = _baseline_calls(simulator.url, items, n, args.baseline_concurrency)
            retries = asyncio.run(calls)
            makespan = time.monotonic() - started
        return run_row(
            "asyncio baseline", makespan, items, n, simulator_stats(simulator), retries, 0
        )
    finally:
        simulator.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument(
        "--concurrency", type=int, default=256, help="tasks in flight per worker (its default)"
    )
    parser.add_argument(
        "--hog", action="store_true", help="keep every core busy with another process meanwhile"
    )
    parser.add_argument("--baseline-concurrency", type=int, default=64)
    parser.add_argument(
        "--ready-timeout",
        type=float,
        default=300,
        help="seconds the workers may take to start (a loaded host imports slowly)",
    )
    parser.add_argument(
        "--horizon", type=float, default=Settings().rate_horizon_s, help="JURY_RATE_HORIZON"
    )
    parser.add_argument(
        "--margin", type=float, default=Settings().rate_margin, help="JURY_RATE_MARGIN"
    )
    parser.add_argument(
        "--rate-window",
        default="60",
        help="seconds over which the provider enforces rpm (60: per minute; 10: quantized, "
        "rpm/6 per 10 s, which punishes bursts)",
    )
    parser.add_argument(
        "--py-spy", help="a py-spy binary: sample each worker while it runs (--profile-dir)"
    )
    parser.add_argument(
        "--profile-dir", type=Path, help="where --py-spy writes a raw profile per worker"
    )
    parser.add_argument(
        "--runs",
        default="jury-2-free,jury-2,baseline,jury-4-free,jury-4",
        help="which runs, in order (jury-N for N workers, jury-N-free for the same batch "
        "against a provider without quota, baseline)",
    )
    args = parser.parse_args()
    RATE_WINDOW[0] = args.rate_window
    with tempfile.TemporaryDirectory(prefix="jury-bench-") as tmp:
        rows = with_unthrottled(
            [
                run_baseline(Path(tmp) / "baseline", args)
                if run == "baseline"
                else run_jury(Path(tmp), int(run.split("-")[1]), args, not run.endswith("-free"))
                for run in args.runs.split(",")
            ]
        )
    print_table(rows)
    print(
        json.dumps(
            {
                "bench": "ratelimit",
                "minutes": args.minutes,
                "rate_window_s": float(args.rate_window),
                "cpu_hog": args.hog,
                "load_avg": os.getloadavg(),
                "runs": rows,
            }
        )
    )


if __name__ == "__main__":
    main()
