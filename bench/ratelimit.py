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

Prints a table and one JSON line: makespan, ideal makespan, their ratio, per-model
utilisation of the quota, share of calls answered 429, retries.
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import psutil
from sqlalchemy import func, select

from bench.arrivals import (
    fetch_arrivals,
    largest_gap_figure,
    longest_silence_figure,
    watching_ports,
    where_quota_went,
)
from bench.asyncio_baseline import plain_call
from bench.common import figure, local_stack, print_runs, simulator_stats, worker_env
from bench.footprint import Footprint, RedisCommands, wait_cpu_s
from jury.local.services import ManagedProcess, start_simulator, wait_for
from jury.producer.submission import new_batch_id
from jury.settings import Settings
from jury.store.engine import session_factory
from jury.store.models import SampleRow
from jury.store.repository import batch_status

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# `jury submit`, as a user types it: the console script beside this interpreter.
JURY_COMMAND = [str(Path(sys.executable).with_name("jury"))]

MODELS = {"balanced@fast": 1200, "lenient@mid": 600, "strict@slow": 300}
LATENCY = ["--latency-ms", "400", "--latency-sigma", "0.2"]
DIMENSIONS = ["relevance", "accuracy", "helpfulness"]


def plan(minutes: float) -> tuple[int, dict[str, int]]:
    """Items, and samples per item and dimension for each model (4, 2, 1), so that each
    model's calls take `minutes` at its quota."""
    n = {"balanced@fast": 4, "lenient@mid": 2, "strict@slow": 1}
    items = max(1, round(MODELS["strict@slow"] * minutes / len(DIMENSIONS)))
    return items, n


def ideal_makespan(items: int, n: dict[str, int]) -> float:
    cells = items * len(DIMENSIONS)
    return max(cells * n[m] / rpm * 60 for m, rpm in MODELS.items())


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


# The start of a run whose use of each quota is printed apart.
FIRST_SECONDS = 5


def model_figures(stats: dict[str, Any], makespan: float) -> dict[str, dict[str, float]]:
    """Per model: its quota's use over the whole makespan (submission to the last verdict),
    and while the provider was answering it (its first to its latest answer: the limiter's
    own share, without the batch's start and end), and in its first FIRST_SECONDS (a start
    that keeps the workers busy leaves calls late for their slots, and each is quota lost)."""
    figures = {}
    for model, rpm in MODELS.items():
        counts = stats["models"].get(model, {})
        ok, throttled = counts.get("200", 0), counts.get("429", 0)
        total = sum(v for k, v in counts.items() if k.isdigit())
        first, last = stats.get("answered_s", {}).get(model, (0.0, 0.0))
        figures[model] = {
            "rpm": rpm,
            "calls_ok": ok,
            "answered_429": throttled,
            "utilisation": round(ok / (rpm * makespan / 60), 3) if makespan else 0.0,
            "use_while_answering": (
                round((ok - 1) / (rpm * (last - first) / 60), 3) if last > first else 0.0
            ),
            "share_429": round(throttled / total, 4) if total else 0.0,
            "use_first_seconds": round(
                sum(stats.get("answered_per_s", {}).get(model, [])[:FIRST_SECONDS])
                / (rpm / 60 * FIRST_SECONDS),
                3,
            ),
            **_leanest_second(stats.get("answered_per_s", {}).get(model, []), rpm),
        }
    return figures


def _leanest_second(per_second: list[int], rpm: int) -> dict[str, float]:
    """The fewest answers in one whole second between the model's first and last (a stall
    shows as one lean second; a pace a little slow, as none), as a share of its quota."""
    inner = per_second[1:-1]
    if not inner:
        return {}
    fewest = min(inner)
    return {"leanest_second": round(fewest / (rpm / 60), 2), "at_s": 1 + inner.index(fewest)}


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
    ) as stack:
        sessions = session_factory(stack.settings.database_url)
        batch = write_batch(folder / label, stack.simulator.url, items, n, quota)
        as_a_remote_provider(stack.simulator)
        provider_port = urllib.parse.urlsplit(stack.simulator.url).port or 80
        processes = {f"worker-{i}": w.process.pid for i, w in enumerate(stack.workers)}
        footprint = Footprint({**processes, "redis": stack.redis.process.pid})
        with cpu_hog(args.hog), watching_ports(stack.workers, provider_port) as owners:
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
        row = _row(label, makespan, items, n, stats, int(retries or 0), deferrals)
        started_at = _start_and_end(stats, provider_clock, makespan)
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


def with_unthrottled(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Beside each throttled jury run, the CPU per judgment of the unthrottled run with as many
    workers in this invocation, and the ratio of the two."""
    free = {r["workers"]: r for r in rows if r.get("quota") is False}
    for row in rows:
        other = free.get(row.get("workers")) if row.get("quota") else None
        if other and other.get("cpu_ms_per_judgment") and row.get("cpu_ms_per_judgment"):
            row["unthrottled_cpu_ms_per_judgment"] = other["cpu_ms_per_judgment"]
            row["cpu_ratio_to_unthrottled"] = round(
                row["cpu_ms_per_judgment"] / other["cpu_ms_per_judgment"], 2
            )
    return rows


def _start_and_end(stats: dict[str, Any], submitted: float, makespan: float) -> dict[str, float]:
    """Where the makespan went besides the provider's answering: from the submission to the
    first answer, and from the last answer to the batch's end (storing, the last verdicts)."""
    spans = list(stats.get("answered_s", {}).values())
    if not spans:
        return {}
    first, last = min(s[0] for s in spans), max(s[1] for s in spans)
    return {
        "to_first_request_s": round(stats["first_request_s"] - submitted, 2),
        "to_first_answer_s": round(first - submitted, 2),
        "after_last_answer_s": round(makespan - (last - submitted), 2),
    }


# Seconds over which the simulator enforces each quota (--rate-window); see main().
RATE_WINDOW = ["60"]


def _limits() -> list[str]:
    limits = [arg for m, rpm in MODELS.items() for arg in ("--model-rpm", f"{m}={rpm}")]
    return [*limits, "--rate-window", RATE_WINDOW[0]]


def _row(
    label: str,
    makespan: float,
    items: int,
    n: dict[str, int],
    stats: dict[str, Any],
    retries: int,
    deferrals: int,
) -> dict[str, Any]:
    ideal = ideal_makespan(items, n)
    models = model_figures(stats, makespan)
    calls = sum(sum(v for k, v in c.items() if k.isdigit()) for c in stats["models"].values())
    throttled = sum(m["answered_429"] for m in models.values())
    return {
        "run": label,
        "makespan_s": round(makespan, 1),
        "ideal_s": round(ideal, 1),
        "ratio": round(ideal / makespan, 3),
        "requests": calls,
        "share_429": round(throttled / calls, 4) if calls else 0.0,
        "retries": retries,
        "deferrals": deferrals,
        "models": models,
    }


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
        return _row("asyncio baseline", makespan, items, n, simulator_stats(simulator), retries, 0)
    finally:
        simulator.stop()


def print_table(rows: list[dict[str, Any]]) -> None:
    columns = ["makespan_s", "ideal_s", "ratio", "requests", "share_429", "retries", "deferrals"]
    columns += ["submit_s", "to_first_request_s", "to_first_answer_s", "after_last_answer_s"]
    columns += ["judgments", "cpu_ms_per_judgment", "unthrottled_cpu_ms_per_judgment"]
    columns += ["cpu_ratio_to_unthrottled", "redis_commands_per_judgment", "peak_pss_mb_sum"]
    lines = [(column, figure(column)) for column in columns]
    lines += [(f"CPU s {name}", _spent("cpu_s", name)) for name in _names(rows)]
    lines += [(f"peak PSS MB {name}", _spent("peak_pss_mb", name)) for name in _names(rows)]
    lines += [(f"util {model}", _model_figure(model, "utilisation")) for model in MODELS]
    lines += [
        (f"use answering {model}", _model_figure(model, "use_while_answering")) for model in MODELS
    ]
    lines += [
        (f"use 1st {FIRST_SECONDS} s {model}", _model_figure(model, "use_first_seconds"))
        for model in MODELS
    ]
    lines += [(f"leanest 1 s {model}", _model_figure(model, "leanest_second")) for model in MODELS]
    lines += [(f"largest gap {model}", largest_gap_figure(model)) for model in MODELS]
    lines += [("longest worker silence", longest_silence_figure)]
    print_runs(rows, "run", lines, label_width=22)


def _model_figure(model: str, name: str) -> Callable[[dict[str, Any]], object]:
    return lambda row: row["models"][model][name]


def _names(rows: list[dict[str, Any]]) -> list[str]:
    """The processes measured in any run (workers, producer, redis), in a stable order."""
    return sorted({name for row in rows for name in row.get("cpu_s", {})})


def _spent(kind: str, name: str) -> Callable[[dict[str, Any]], object]:
    return lambda row: row.get(kind, {}).get(name, "-")


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
