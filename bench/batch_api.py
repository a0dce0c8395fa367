"""Half price at scale: 10,000 judgments through the providers' Batch API, against live calls.

Two runs against the simulator, each on a fresh stack (Redis, simulator, workers): the same
batch of judgments with live judges (every call answered in `--latency-ms`), then with
`batch_api: true` judges, whose provider batches complete no sooner than `--batch-delay`
seconds (30 s: a provider takes minutes to hours). For each: wall time, the HTTP requests jury
made to the provider (chat completions live; files and batches calls through the Batch API),
the provider batches, and the cost at the judges' declared prices (the batch run at half).

Prints a table and one JSON line.

    python -m bench.batch_api [--judgments 10000] [--batch-delay 30] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import figure, local_stack, print_runs, simulator_stats
from jury.batchfile.loading import load_batch
from jury.local.services import wait_for
from jury.producer.submission import submit_batch
from jury.store.engine import session_factory
from jury.store.provider_batches import provider_batches
from jury.store.repository import batch_status

JUDGES = ("balanced", "lenient")
# gpt-4o-mini's live prices, declared so that the simulator's judges have a price.
PRICES = "input_cost_per_token: 1.5e-7, output_cost_per_token: 6.0e-7"


def write_batch(folder: Path, api_base: str, judgments: int, batch_api: bool) -> tuple[Path, int]:
    n_items = -(-judgments // len(JUDGES))
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "items.jsonl").open("w") as out:
        for n in range(n_items):
            out.write(json.dumps({"id": f"i{n:05d}", "output": f"Answer {n}."}) + "\n")
    flag = ", batch_api: true" if batch_api else ""
    judges = ",".join(
        f"{{model: openai/{j}, n: 1, api_base: '{api_base}', {PRICES}{flag}}}" for j in JUDGES
    )
    batch = folder / "batch.yaml"
    batch.write_text(
        f"name: batch-api\njudges: [{judges}]\ndimensions: [relevance]\nitems: items.jsonl\n"
    )
    return batch, n_items * len(JUDGES)


def run(folder: Path, batch_api: bool, args: argparse.Namespace) -> dict[str, Any]:
    simulator = ["--latency-ms", str(args.latency_ms), "--latency-sigma", "0.05"]
    simulator += ["--batch-delay", str(args.batch_delay), "--batch-dir", str(folder / "sim")]
    label = "batch API" if batch_api else "live"
    with local_stack(folder, label.replace(" ", "-"), simulator, args.workers) as stack:
        batch, judgments = write_batch(folder, stack.simulator.url, args.judgments, batch_api)
        sessions = session_factory(stack.settings.database_url)
        started = time.monotonic()
        batch_id = submit_batch(load_batch(batch), sessions, stack.app)
        wait_for(lambda: batch_status(sessions, batch_id).status.finished, 3600, "the batch", 0.5)
        wall = time.monotonic() - started
        status = batch_status(sessions, batch_id)
        stats = simulator_stats(stack.simulator)
        api: dict[str, int] = stats.get("batch_api") or {}
        live_calls = int(stats["total"]) - (int(api.get("lines", 0)) if batch_api else 0)
        return {
            "run": label,
            "judgments": judgments,
            "failed": status.n_failed_samples,
            "wall_s": round(wall, 1),
            "provider_requests": live_calls + int(api.get("api_calls", 0)),
            "completions_live": live_calls,
            "batch_lines": int(api.get("lines", 0)),
            "provider_batches": len(provider_batches(sessions, batch_id)),
            "cost_usd": round(status.cost_usd, 6),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judgments", type=int, default=10_000)
    parser.add_argument("--batch-delay", type=float, default=30.0)
    parser.add_argument("--latency-ms", type=int, default=500, help="live answers' latency")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runs", default="live,batch")
    args = parser.parse_args()
    # The workers inherit these: a short collection window and polls every 2 s.
    os.environ.setdefault("JURY_BATCH_API_WINDOW", "2")
    os.environ.setdefault("JURY_BATCH_API_POLL", "2")
    rows = []
    with tempfile.TemporaryDirectory(prefix="jury-batch-api-") as tmp:
        for name in args.runs.split(","):
            rows.append(run(Path(tmp) / name, name == "batch", args))
    if len(rows) == 2 and rows[0]["cost_usd"]:
        rows[1]["cost_vs_live"] = round(rows[1]["cost_usd"] / rows[0]["cost_usd"], 3)
    lines = [(column, figure(column)) for column in ("judgments", *list(rows[-1])[2:])]
    print_runs(rows, "run", lines, label_width=20, width=14)
    print(json.dumps({"bench": "batch_api", "batch_delay_s": args.batch_delay, "runs": rows}))


if __name__ == "__main__":
    main()
