"""Idle benchmark: what a worker with nothing to do costs. Starts a private Redis and N
workers (`python -m jury.worker`, default settings) on an otherwise empty database, waits for
them to settle, then samples over a window: the CPU of each worker's process tree (psutil
cpu_times of the process and its children), the Redis commands per second they cause (INFO
commandstats, per command), and Redis' own CPU.

    .venv/bin/python -m bench.idle [--workers 1] [--settle 25] [--seconds 30]

Prints a table and one JSON line. Target (issue 35): an idle worker under 0.5 % of a core.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import worker_env
from bench.footprint import RedisCommands, tree_cpu_s
from jury.local.services import ManagedProcess, start_embedded_redis, start_worker, wait_for
from jury.producer.publishing import create_producer_app
from jury.settings import Settings

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def measure(
    workers: list[ManagedProcess], redis_server: ManagedProcess, seconds: float
) -> dict[str, Any]:
    before_cpu = [tree_cpu_s(w.process.pid) for w in workers]
    before_redis = tree_cpu_s(redis_server.process.pid)
    commands = RedisCommands(redis_server.url)
    started = time.monotonic()
    time.sleep(seconds)  # the measured window itself, not a synchronisation
    elapsed = time.monotonic() - started
    after_cpu = [tree_cpu_s(w.process.pid) for w in workers]
    after_redis = tree_cpu_s(redis_server.process.pid)
    delta = commands.since()
    per_worker = [
        round(100 * (a - b) / elapsed, 3) for a, b in zip(after_cpu, before_cpu, strict=True)
    ]
    return {
        "seconds": round(elapsed, 1),
        "worker_cpu_pct": per_worker,
        "worker_cpu_pct_mean": round(sum(per_worker) / len(per_worker), 3),
        "redis_cpu_pct": round(100 * (after_redis - before_redis) / elapsed, 3),
        "redis_commands_per_s": round(sum(delta.values()) / elapsed, 2),
        "redis_commands": delta,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--settle", type=float, default=25.0, help="seconds before sampling")
    parser.add_argument("--seconds", type=float, default=30.0, help="the sampled window")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="jury-bench-idle-") as tmp:
        folder = Path(tmp)
        redis_server = start_embedded_redis(folder)
        settings = Settings.model_validate(
            {
                "broker_url": redis_server.url,
                "database_url": f"sqlite:///{folder / 'idle.db'}",
                "queue": f"bench-{secrets.token_hex(3)}",
            }
        )
        app = create_producer_app(settings)
        nodes = [f"bench-idle-{n}@localhost" for n in range(args.workers)]
        workers = [start_worker(folder, worker_env(settings), node) for node in nodes]
        try:
            wait_for(
                lambda: len(app.control.ping(destination=nodes, timeout=0.5)) == len(nodes),
                120,
                "workers",
            )
            time.sleep(args.settle)  # let start-up work (imports, first sweeps) pass
            row = measure(workers, redis_server, args.seconds)
        finally:
            for worker in workers:
                worker.stop()
            redis_server.stop()
    load = os.getloadavg()
    print(f"{'workers':<34}{args.workers:>10}")
    print(f"{'window (s)':<34}{row['seconds']:>10}")
    for n, pct in enumerate(row["worker_cpu_pct"]):
        print(f"{f'worker {n} CPU (% of a core)':<34}{pct:>10}")
    print(f"{'Redis CPU (% of a core)':<34}{row['redis_cpu_pct']:>10}")
    print(f"{'Redis commands/s':<34}{row['redis_commands_per_s']:>10}")
    for name, calls in row["redis_commands"].items():
        print(f"{f'  {name} /s':<34}{round(calls / row['seconds'], 2):>10}")
    print(f"{'load average (1 min)':<34}{load[0]:>10.2f}")
    print(json.dumps({"bench": "idle", "workers": args.workers, "load_avg": load, **row}))


if __name__ == "__main__":
    main()
