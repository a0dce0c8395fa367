"""Result-cache benchmark: what a re-run of the same batch costs, and what the cache costs.

    .venv/bin/python -m bench.cache [--items 200] [--latency-ms 200] [--workers 2]

One stack (embedded Redis, the simulator answering after `--latency-ms`, `--workers` worker
processes, one SQLite database) judges the same batch three times — `--items` answers ×
relevance and accuracy × judges `balanced` and `strict` × 3 samples, priced at our own
$1 per million tokens so that cost shows:

- `cache: false`: no lookup, nothing stored — jury without the cache;
- `first run`: `cache: true` with an empty cache — every lookup misses, every answer is stored;
- `re-run`: `cache: true` again — every sample is a hit.

A small batch of other items runs first, unreported, so that no run pays for the workers'
start-up (their first calls import LiteLLM).

For each: judge calls the simulator answered, what the stored samples cost, the makespan
(submission to last verdict), and the CPU of the worker processes per judgment. Prints a
table and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from bench.common import Stack, local_stack, simulator_stats
from jury.batchfile.loading import load_batch
from jury.local.services import wait_for
from jury.producer.submission import submit_batch
from jury.store.cache import count_cached_answers
from jury.store.engine import session_factory
from jury.store.repository import batch_status

JUDGES = ("balanced", "strict")
SAMPLES = 3
DIMENSIONS = ("relevance", "accuracy")
PRICE_PER_TOKEN = 1e-6
WARM_UP_ITEMS = 10  # other items than the measured ones: nothing of them is cached


def write_batch(folder: Path, api_base: str, items: int, cache: bool) -> Path:
    items_file = folder / f"items-{items}.jsonl"
    if not items_file.exists():
        items_file.write_text(
            "".join(
                json.dumps({"id": f"i{n}", "input": f"Question {n}?", "output": f"Answer {n}."})
                + "\n"
                for n in range(items)
            )
        )
    judges = [
        {
            "model": f"openai/{judge}",
            "n": SAMPLES,
            "api_base": api_base,
            "input_cost_per_token": PRICE_PER_TOKEN,
            "output_cost_per_token": PRICE_PER_TOKEN,
        }
        for judge in JUDGES
    ]
    batch = folder / f"cache-{cache}-{items}.json"
    batch.write_text(
        json.dumps(
            {
                "name": "cache bench",
                "judges": judges,
                "dimensions": list(DIMENSIONS),
                "items": items_file.name,
                "cache": cache,
            }
        )
    )
    return batch


def worker_cpu_s(stack: Stack) -> float:
    total = 0.0
    for worker in stack.workers:
        process = psutil.Process(worker.process.pid)
        for p in [process, *process.children(recursive=True)]:
            times = p.cpu_times()
            total += times.user + times.system
    return total


def calls_answered(stack: Stack) -> int:
    return int(simulator_stats(stack.simulator)["total"])


def run_once(stack: Stack, folder: Path, label: str, items: int, cache: bool) -> dict[str, Any]:
    sessions = session_factory(stack.settings.database_url)
    batch = write_batch(folder, stack.simulator.url, items, cache)
    calls_before, cpu_before = calls_answered(stack), worker_cpu_s(stack)
    started = time.monotonic()
    batch_id = submit_batch(load_batch(batch), sessions, stack.app)
    wait_for(lambda: batch_status(sessions, batch_id).status.finished, 1800, "the batch", 0.2)
    makespan = time.monotonic() - started
    status = batch_status(sessions, batch_id)
    judgments = status.n_samples
    return {
        "run": label,
        "judgments": judgments,
        "judge_calls": calls_answered(stack) - calls_before,
        "cost_usd": round(status.cost_usd, 4),
        "makespan_s": round(makespan, 1),
        "worker_cpu_ms_per_judgment": round(
            (worker_cpu_s(stack) - cpu_before) * 1000 / max(1, judgments), 2
        ),
        "failed": status.n_failed_samples,
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    columns = [
        ("judgments", "judgments", "{}"),
        ("judge calls", "judge_calls", "{}"),
        ("cost", "cost_usd", "${:.4f}"),
        ("makespan", "makespan_s", "{:.1f} s"),
        ("worker CPU/judgment", "worker_cpu_ms_per_judgment", "{:.2f} ms"),
    ]
    header = f"{'run':<16}" + "".join(f"{title:>22}" for title, _, _ in columns)
    print(header)
    print("-" * len(header))
    for row in rows:
        cells = [fmt.format(row[key]) for _, key, fmt in columns]
        print(f"{row['run']:<16}" + "".join(f"{cell:>22}" for cell in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=32, help="threads per worker")
    args = parser.parse_args()
    if args.items < 1 or args.workers < 1:
        parser.error("--items and --workers must be at least 1")
    with tempfile.TemporaryDirectory(prefix="jury-bench-") as tmp:
        folder = Path(tmp)
        options = ["--latency-ms", str(args.latency_ms)]
        with local_stack(
            folder, "cache", options, args.workers, worker_concurrency=args.concurrency
        ) as stack:
            # Warm-up, not reported: the workers' first calls import LiteLLM (seconds of CPU).
            run_once(stack, folder, "warm-up", WARM_UP_ITEMS, cache=False)
            rows = [
                run_once(stack, folder, "cache: false", args.items, cache=False),
                run_once(stack, folder, "first run", args.items, cache=True),
                run_once(stack, folder, "re-run", args.items, cache=True),
            ]
            cached = count_cached_answers(session_factory(stack.settings.database_url))
    print()
    print_table(rows)
    print(f"\n{cached} answers in the cache after the runs")
    print(
        json.dumps(
            {
                "bench": "cache",
                "items": args.items,
                "latency_ms": args.latency_ms,
                "workers": args.workers,
                "concurrency": args.concurrency,
                "cached_answers": cached,
                "runs": rows,
            }
        )
    )


if __name__ == "__main__":
    main()
