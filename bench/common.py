"""What the benchmarks share: starting a local stack (embedded Redis, simulator, workers)."""

from __future__ import annotations

import json
import os
import secrets
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from celery import Celery

from jury.local.services import (
    ManagedProcess,
    start_embedded_redis,
    start_simulator,
    start_worker,
    wait_for,
)
from jury.producer.publishing import create_producer_app
from jury.settings import Settings

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def worker_env(settings: Settings) -> dict[str, str]:
    return {**os.environ, **settings.to_env()}


# `jury submit` and load_batch in a benchmark's own process check the batch against the
# egress policy of its environment: the simulator, on loopback, is allowed there too.
os.environ.setdefault("JURY_EGRESS_ALLOW", "loopback")


def simulator_stats(simulator: ManagedProcess) -> dict[str, Any]:
    """The simulator's GET /stats, as JSON gives it."""
    with urllib.request.urlopen(simulator.url.removesuffix("/v1") + "/stats") as answer:
        stats: dict[str, Any] = json.load(answer)
    return stats


@dataclass
class Stack:
    settings: Settings
    app: Celery
    redis: ManagedProcess
    simulator: ManagedProcess
    workers: list[ManagedProcess]


@contextmanager
def local_stack(
    folder: Path,
    label: str,
    simulator_options: list[str],
    n_workers: int,
    appendonly: bool = False,
    own_groups: bool = False,
    ready_timeout_s: float = 90,
    **settings: object,
) -> Iterator[Stack]:
    """Redis, the simulator and `n_workers` workers, all stopped on exit; the workers must
    answer a ping within `ready_timeout_s` (a loaded host starts them slowly)."""
    folder.mkdir(parents=True, exist_ok=True)
    redis_server = start_embedded_redis(folder, appendonly=appendonly)
    simulator = start_simulator(folder, simulator_options)
    config = Settings.model_validate(
        {
            "broker_url": redis_server.url,
            "database_url": f"sqlite:///{folder / f'{label}.db'}",
            "queue": f"bench-{secrets.token_hex(3)}",
            # The simulator is on loopback, which the egress policy refuses by default.
            "egress_allow": "loopback",
            **settings,
        }
    )
    app = create_producer_app(config)
    nodes = [f"bench-{label}-{n}@localhost" for n in range(n_workers)]
    workers = [
        start_worker(folder, worker_env(config), node, own_group=own_groups) for node in nodes
    ]
    try:
        wait_for(
            lambda: len(app.control.ping(destination=nodes, timeout=0.5)) == len(nodes),
            ready_timeout_s,
            "workers",
        )
        yield Stack(config, app, redis_server, simulator, workers)
    finally:
        for worker in workers:
            worker.stop()
        simulator.stop()
        redis_server.stop()


def print_runs(
    rows: list[dict[str, Any]],
    heading: str,
    lines: list[tuple[str, Callable[[dict[str, Any]], object]]],
    label_width: int = 30,
    width: int = 18,
) -> None:
    """A table with one column per run (headed by `row[heading]`) and one line per figure:
    (label, how to read it off a run); a missing figure shows as '-'."""
    print(f"{'':<{label_width}}" + "".join(f"{row[heading]!s:>{width}}" for row in rows))
    for label, value in lines:
        print(f"{label:<{label_width}}" + "".join(f"{value(row)!s:>{width}}" for row in rows))


def figure(key: str) -> Callable[[dict[str, Any]], object]:
    """Read `key` off a run, '-' where the run has no such figure."""
    return lambda row: row.get(key, "-")
