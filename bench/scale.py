"""Scale, kept: one batch of a million judgments, 2 workers, PostgreSQL, zero-latency judges.

Runs, side by side in one run:
  publish   `jury submit` of `--publish` judgments with no worker and no bound: the producer's
            rate alone (bench.throughput's publish-only run)
  small     a batch of `--small` judgments, end to end: the baseline for the large one's rate
            and memory
  large     the batch of `--judgments` judgments, end to end

Each end-to-end run has a fresh PostgreSQL database (created and dropped here), an embedded
Redis, the simulator answering at once, `--workers` workers and `jury submit` as its own
process, all at jury's default settings. Every `--interval` seconds it samples the judgments
stored, the RSS and PSS of each worker (with its children), of the producer and of
redis-server, Redis' used_memory and the machine's load average. At the end it checks that
every planned sample is stored exactly once (rows per item, dimension, judge and sample, in
the database; the simulator's count of calls), and lists the Redis keys left once the batch is
done, with their time to live: a deployment's own keys (its workers' heartbeats) stay, a
batch's must not.

Prints a table (the time series summarized: its first, middle and last samples, the steady
rate, the workers' RSS slope over the second half) and one JSON line with the whole series.

    python -m bench.scale [--judgments 1000000] [--small 20000] [--publish 100000]
        [--workers 2] [--interval 10] [--runs publish,small,large]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import statistics
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
import redis
import sqlalchemy

from bench.asyncio_baseline import DIMENSIONS, JUDGES
from bench.common import Stack, local_stack, simulator_stats, worker_env
from bench.throughput import JURY, SAMPLES, SIMULATOR, run_publish_only, write_batch
from jury.broker.redis_client import BrokerRedis, as_text
from jury.errors import UnknownBatchError
from jury.local.services import wait_for
from jury.store.engine import dispose_all, session_factory
from jury.store.repository import batch_status
from jury.store.sql import Sessions
from jury.worker.engine.watchdog import nothing_pending

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
POSTGRES_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
MB = 2**20


@contextmanager
def postgres_database(admin_url: str) -> Iterator[str]:
    """A fresh database on the server of `admin_url`, dropped on exit; yields its URL."""
    admin = sqlalchemy.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    name = f"jury_scale_{secrets.token_hex(4)}"
    with admin.connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE {name}")
    try:
        yield admin_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        dispose_all()
        with admin.connect() as connection:
            connection.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.dispose()


def tree_memory(process: psutil.Process) -> tuple[int, int]:
    """RSS and PSS of a process and its children, in bytes (0, 0 once it is gone)."""
    rss = pss = 0
    try:
        tree = [process, *process.children(recursive=True)]
    except psutil.Error:
        return 0, 0
    for member in tree:
        try:
            info = member.memory_full_info()
        except psutil.Error:
            continue
        rss += info.rss
        pss += getattr(info, "pss", info.rss)
    return rss, pss


class Series(threading.Thread):
    """Samples the run every `interval` seconds until stopped (and once more then)."""

    def __init__(self, stack: Stack, batch_id: str, interval: float) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.batch_id = batch_id
        self.sessions = session_factory(stack.settings.database_url)
        self.client = redis.Redis.from_url(stack.settings.broker_url)
        self.processes = {
            f"worker{n}": psutil.Process(w.process.pid) for n, w in enumerate(stack.workers)
        }
        self.processes["redis"] = psutil.Process(stack.redis.process.pid)
        self.producer: psutil.Process | None = None
        self.started = time.monotonic()
        self.samples: list[dict[str, Any]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            self.sample()
        self.sample()

    def sample(self) -> None:
        try:
            stored = batch_status(self.sessions, self.batch_id).n_samples
        except Exception:
            stored = 0  # not recorded yet
        row: dict[str, Any] = {"t_s": round(time.monotonic() - self.started, 1), "stored": stored}
        processes = dict(self.processes)
        if self.producer is not None and self.producer.is_running():
            processes["producer"] = self.producer
        for role, process in processes.items():
            rss, pss = tree_memory(process)
            if rss:
                row[f"{role}_rss_mb"] = round(rss / MB, 1)
                row[f"{role}_pss_mb"] = round(pss / MB, 1)
        row["redis_used_mb"] = round(int(self.client.info("memory")["used_memory"]) / MB, 1)
        row["load1"] = round(os.getloadavg()[0], 2)
        if self.samples and row["t_s"] - self.samples[-1]["t_s"] >= self.interval / 2:
            last = self.samples[-1]
            row["per_s"] = round((stored - last["stored"]) / (row["t_s"] - last["t_s"]), 1)
        self.samples.append(row)
        print(  # progress, for whoever watches a long run
            f"{row['t_s']:>8} s {stored:>9} stored {row.get('per_s', '-'):>8}/s  "
            + " ".join(f"{k.removesuffix('_mb')} {v}" for k, v in row.items() if "rss" in k)
            + f"  load {row['load1']}",
            file=sys.stderr,
            flush=True,
        )


def exactly_once(database_url: str, batch_id: str, n_items: int) -> dict[str, Any]:
    """Is every planned sample stored once? The plan: each item × dimension × judge has the
    samples 0 .. SAMPLES-1. The store's unique key forbids a duplicate; this counts them
    anyway, and the missing ones."""
    engine = sqlalchemy.create_engine(database_url)
    planned = n_items * len(DIMENSIONS) * len(JUDGES) * SAMPLES
    with engine.connect() as connection:
        rows, distinct, failed = connection.execute(
            sqlalchemy.text(
                "SELECT count(*), count(DISTINCT (item_id, dimension, judge, sample)),"
                " count(error) FROM jury_samples WHERE batch_id = :b"
            ),
            {"b": batch_id},
        ).one()
        # Groups whose samples are not exactly 0 .. SAMPLES-1, and how many groups there are.
        groups, wrong = connection.execute(
            sqlalchemy.text(
                "SELECT count(*), count(*) FILTER (WHERE n <> :k OR d <> :k OR lo <> 0"
                " OR hi <> :k - 1) FROM (SELECT count(*) n, count(DISTINCT sample) d,"
                " min(sample) lo, max(sample) hi FROM jury_samples WHERE batch_id = :b"
                " GROUP BY item_id, dimension, judge) g"
            ),
            {"b": batch_id, "k": SAMPLES},
        ).one()
        items, dimensions, judges = connection.execute(
            sqlalchemy.text(
                "SELECT count(DISTINCT item_id), array_agg(DISTINCT dimension),"
                " array_agg(DISTINCT judge) FROM jury_samples WHERE batch_id = :b"
            ),
            {"b": batch_id},
        ).one()
    engine.dispose()
    plan_groups = n_items * len(DIMENSIONS) * len(JUDGES)
    right = (
        rows == distinct == planned
        and groups == plan_groups
        and wrong == 0
        and items == n_items
        and sorted(dimensions) == sorted(DIMENSIONS)
        and sorted(judges) == sorted(f"openai/{j}" for j in JUDGES)
    )
    return {
        "planned": planned,
        "rows": rows,
        "duplicates": rows - distinct,
        "missing": planned - distinct,
        "failed_samples": failed,
        "exactly_once": right,
    }


def keys_left(url: str) -> list[dict[str, Any]]:
    """Every key in the Redis database, with its type and time to live (-1: none)."""
    client = redis.Redis.from_url(url)
    found = []
    for key in sorted(client.scan_iter(count=1000)):
        found.append(
            {"key": as_text(key), "type": as_text(client.type(key)), "ttl_s": client.ttl(key)}
        )
    client.close()
    return found


def drained(stack: Stack) -> bool:
    """No task left queued, unacknowledged or parked (what the lost-task watch asks)."""
    broker = BrokerRedis.from_settings(stack.settings)
    try:
        return nothing_pending(broker, stack.settings)
    finally:
        broker.close()


def run_batch(tmp: Path, label: str, judgments_wanted: int, args: argparse.Namespace) -> Any:
    folder = tmp / label
    with (
        postgres_database(args.postgres) as database_url,
        local_stack(folder, label, SIMULATOR, args.workers, database_url=database_url) as stack,
    ):
        batch, judgments = write_batch(folder, stack.simulator.url, judgments_wanted)
        n_items = judgments // (len(DIMENSIONS) * len(JUDGES) * SAMPLES)
        series = Series(stack, label, args.interval)
        cpu_before = {role: _cpu(p) for role, p in series.processes.items()}
        series.start()
        started = time.monotonic()
        command = [*JURY, "submit", str(batch), "--batch-id", label, "--quiet"]
        producer = subprocess.Popen(command, env=worker_env(stack.settings), cwd=folder)
        series.producer = psutil.Process(producer.pid)
        sessions = session_factory(database_url)
        try:
            wait_for(lambda: finished(sessions, label, series.producer), 6 * 3600, "batch", 1)
        except BaseException:
            producer.kill()
            raise
        wall = time.monotonic() - started
        if os.environ.get("JURY_BENCH_TRACEMALLOC"):
            # One more snapshot of the traced worker once idle: what the batch left behind,
            # with nothing in flight to hide it.
            time.sleep(float(os.environ.get("JURY_BENCH_TRACEMALLOC_EVERY_S", "120")) + 30)
        _, status, usage = os.wait4(producer.pid, 0)
        producer.returncode = os.waitstatus_to_exitcode(status)
        series.stopped.set()
        series.join()
        wait_for(lambda: drained(stack), 60, "the queues to drain", 0.5)
        left = keys_left(stack.settings.broker_url)
        cpu = {role: _cpu(p) - cpu_before[role] for role, p in series.processes.items()}
        cpu["producer"] = usage.ru_utime + usage.ru_stime
        calls = simulator_stats(stack.simulator)["total"]
        check = exactly_once(database_url, label, n_items)
        state = batch_status(sessions, label).status.value
    return {
        "run": label,
        "judgments": judgments,
        "state": state,
        "producer_exit": producer.returncode,
        "wall_s": round(wall, 1),
        "judgments_per_s": round(judgments / wall, 1),
        **summarize(series.samples),
        "cpu_ms_per_judgment": {k: round(1000 * v / judgments, 3) for k, v in cpu.items()},
        **check,
        "simulator_calls": calls,
        "keys_left": left,
        "series": series.samples,
    }


def finished(sessions: Sessions, batch_id: str, producer: psutil.Process | None) -> bool:
    """The batch is done; an error if its producer died before recording it."""
    try:
        return batch_status(sessions, batch_id).status.finished
    except UnknownBatchError:
        if producer is not None and producer.status() == psutil.STATUS_ZOMBIE:
            raise SystemExit(f"jury submit of {batch_id} exited before recording it") from None
        return False


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def summarize(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The series in a few figures: the steady rate (median of the sampled rates between a
    tenth and nine tenths of the run), the peaks, and the workers' RSS slope over the
    second half (MB a minute: a creep shows as a positive slope)."""
    rates = [s["per_s"] for s in samples if "per_s" in s]
    tenth = len(rates) // 10
    steady = rates[tenth : len(rates) - tenth] or rates
    summary: dict[str, Any] = {
        "steady_per_s": round(statistics.median(steady), 1) if steady else None,
        "load1_mean": round(statistics.fmean(s["load1"] for s in samples), 2),
    }
    for field in sorted({k for s in samples for k in s if k.endswith("_mb")}):
        values = [s[field] for s in samples if field in s]
        summary[f"peak_{field}"] = max(values)
    for role in sorted({k.removesuffix("_rss_mb") for s in samples for k in s}):
        if role.startswith("worker"):
            points = [(s["t_s"], s[f"{role}_rss_mb"]) for s in samples if f"{role}_rss_mb" in s]
            half = points[len(points) // 2 :]
            if len(half) >= 3:
                slope = statistics.linear_regression(*zip(*half, strict=True)).slope
                summary[f"{role}_rss_slope_mb_per_min"] = round(60 * slope, 3)
                summary[f"{role}_rss_first_last_mb"] = [points[0][1], points[-1][1]]
                # Against the judgments stored rather than the clock: a loaded machine's
                # slower run shows the same growth per judgment.
                stored = [(s["stored"], s[f"{role}_rss_mb"]) for s in samples[len(samples) // 2 :]]
                if len({x for x, _ in stored}) >= 3:
                    per = statistics.linear_regression(*zip(*stored, strict=True)).slope
                    summary[f"{role}_rss_slope_mb_per_100k"] = round(100_000 * per, 3)
    return summary


def print_runs(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        print(f"\n== {row['run']}: {row['judgments']:,} judgments")
        if "publish_per_s" in row:
            print(f"  published {row['publish_per_s']:,} tasks/s ({row['wall_s']} s)")
            continue
        print(
            f"  {row['state']} in {row['wall_s']} s: {row['judgments_per_s']} judgments/s, "
            f"steady {row['steady_per_s']}/s; load average (1 min) {row['load1_mean']} mean"
        )
        print(
            f"  exactly once: {row['exactly_once']} ({row['rows']:,} rows of {row['planned']:,}"
            f" planned, {row['duplicates']} duplicates, {row['missing']} missing,"
            f" {row['failed_samples']} failed; the simulator answered {row['simulator_calls']:,}"
            " calls)"
        )
        peaks = {k.removeprefix("peak_"): v for k, v in row.items() if k.startswith("peak_")}
        print("  peaks (MB): " + ", ".join(f"{k} {v}" for k, v in peaks.items()))
        for key, value in row.items():
            if "slope" in key or "first_last" in key:
                print(f"  {key}: {value}")
        cpu = row["cpu_ms_per_judgment"]
        print("  CPU ms/judgment: " + ", ".join(f"{k} {v}" for k, v in cpu.items()))
        print_series(row["series"])
        print(f"  Redis keys left after the batch: {len(row['keys_left'])}")
        for key in row["keys_left"]:
            print(f"    {key['key']}  ({key['type']}, ttl {key['ttl_s']} s)")


def print_series(samples: list[dict[str, Any]], lines: int = 12) -> None:
    """About `lines` samples, evenly spread, the last one always among them."""
    step = max(1, len(samples) // lines)
    shown = samples[::step]
    if shown[-1] is not samples[-1]:
        shown.append(samples[-1])
    columns = ["t_s", "stored", "per_s", "load1", "redis_used_mb"]
    columns += sorted({k for s in samples for k in s if k.endswith("_mb")} - set(columns))
    print("  " + "".join(f"{c.removesuffix('_mb'):>14}" for c in columns) + "  (MB)")
    for sample in shown:
        print("  " + "".join(f"{sample.get(c, '-')!s:>14}" for c in columns))


def trace_first_worker(path: Path) -> None:
    """Every process started from here finds bench/tracemalloc_site's sitecustomize; it
    traces the worker whose node name holds `-0@` (local_stack's first) and no other."""
    site = str(Path(__file__).with_name("tracemalloc_site"))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (site, os.environ.get("PYTHONPATH")) if p)
    os.environ["JURY_BENCH_TRACEMALLOC"] = str(path)
    os.environ["JURY_BENCH_TRACEMALLOC_NODE"] = "-0@"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judgments", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=20_000, help="the baseline batch")
    parser.add_argument("--publish", type=int, default=100_000, help="publish-only judgments")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--postgres", default=POSTGRES_ADMIN, help="an admin URL of the server")
    parser.add_argument("--runs", default="publish,small,large")
    parser.add_argument(
        "--tracemalloc",
        metavar="FILE",
        help="trace the first worker's Python allocations (bench/tracemalloc_site): where its "
        "memory grows goes to FILE.<pid>; the other workers run as usual",
    )
    args = parser.parse_args()
    # Stopped with SIGTERM (a run started in the background ignores SIGINT), it still stops
    # its processes and drops its database on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.tracemalloc:
        trace_first_worker(Path(args.tracemalloc).resolve())
    rows = []
    with tempfile.TemporaryDirectory(prefix="jury-scale-") as tmp:
        for run in args.runs.split(","):
            if run == "publish":
                publish = argparse.Namespace(judgments=args.publish)
                rows.append(run_publish_only(Path(tmp) / "publish", publish))
            elif run == "small":
                rows.append(run_batch(Path(tmp), f"small-{args.small}", args.small, args))
            elif run == "large":
                rows.append(run_batch(Path(tmp), f"large-{args.judgments}", args.judgments, args))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print_runs(rows)
    print(json.dumps({"bench": "scale", "workers": args.workers, "runs": rows}))


if __name__ == "__main__":
    main()
