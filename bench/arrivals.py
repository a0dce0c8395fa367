"""Where a rate-limit run lost quota: the provider's side of it, read from the simulator's
record of each request's arrival (GET /stats/arrivals) and from which worker process held
each client port.

A model whose quota went partly unused over a run shows it as a gap in its arrivals. Three
causes look different here:
- a cool-down: the gap follows a refused request (a 429) by less than a second;
- a worker stalled (descheduled by a busy CPU, its event loop held up): that worker sent
  nothing, to any model, for about as long, while the other workers did;
- a pace a little slow: no long gap at all, only fewer arrivals evenly.
"""

from __future__ import annotations

import itertools
import json
import threading
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psutil

from jury.local.services import ManagedProcess

Arrival = tuple[float, int, int]  # uptime seconds, admitted (1) or refused (0), client port

# A refusal this long before a gap counts as its cause.
COOL_DOWN_CAUSE_S = 1.0


def fetch_arrivals(simulator: ManagedProcess) -> dict[str, list[Arrival]]:
    with urllib.request.urlopen(simulator.url.removesuffix("/v1") + "/stats/arrivals") as answer:
        seen: dict[str, list[list[float]]] = json.load(answer)
    return {model: [(a[0], int(a[1]), int(a[2])) for a in rows] for model, rows in seen.items()}


@contextmanager
def watching_ports(workers: list[ManagedProcess], port: int) -> Iterator[dict[int, int]]:
    """While the block runs, which worker (its index) holds each local port connected to
    `port` (the simulator's), sampled every 200 ms: connections come and go with the pools."""
    owners: dict[int, int] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            for index, worker in enumerate(workers):
                try:
                    process = psutil.Process(worker.process.pid)
                    family = [process, *process.children(recursive=True)]
                    for member in family:
                        for conn in member.net_connections(kind="tcp"):
                            if conn.raddr and conn.raddr.port == port:
                                owners[conn.laddr.port] = index
                except psutil.Error:
                    continue

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    try:
        yield owners
    finally:
        done.set()
        watcher.join()


def _longest_pause(times: list[float]) -> tuple[float, float]:
    """The longest time between two of these (sorted) times, and when it began."""
    return max((b - a, a) for a, b in itertools.pairwise(times))


def largest_gap(arrivals: list[Arrival]) -> dict[str, float]:
    """The longest time between two admitted arrivals, when it began, and how many refusals
    came from COOL_DOWN_CAUSE_S before it to its end."""
    admitted = [a[0] for a in arrivals if a[1]]
    if len(admitted) < 2:
        return {}
    gap, at = _longest_pause(admitted)
    refused = [a[0] for a in arrivals if not a[1] and at - COOL_DOWN_CAUSE_S <= a[0] <= at + gap]
    return {"largest_gap_s": round(gap, 3), "gap_at_s": round(at, 2), "refused_near": len(refused)}


def worker_silences(
    arrivals: dict[str, list[Arrival]], owners: dict[int, int], workers: int
) -> list[dict[str, float]]:
    """Per worker, the longest time it sent nothing to any model, between its first and its
    last request, and when it began."""
    times: list[list[float]] = [[] for _ in range(workers)]
    for rows in arrivals.values():
        for at, _admitted, port in rows:
            if port in owners:
                times[owners[port]].append(at)
    silences: list[dict[str, float]] = []
    for sent in times:
        sent.sort()
        if len(sent) < 2:
            silences.append({})
            continue
        gap, at = _longest_pause(sent)
        silences.append({"silent_s": round(gap, 3), "at_s": round(at, 2), "sends": len(sent)})
    return silences


def where_quota_went(
    arrivals: dict[str, list[Arrival]], owners: dict[int, int], workers: int, since: float = 0.0
) -> dict[str, Any]:
    """Per model its largest gap; per worker its longest silence; and the share of arrivals
    whose port no sample caught (a connection opened and closed between two samples). Times
    are counted from `since` on the simulator's clock (the batch's submission)."""
    arrivals = {
        model: [(round(at - since, 4), admitted, port) for at, admitted, port in rows]
        for model, rows in arrivals.items()
    }
    ports = [a[2] for rows in arrivals.values() for a in rows]
    unknown = sum(1 for port in ports if port not in owners)
    return {
        "gaps": {model: largest_gap(rows) for model, rows in arrivals.items()},
        "worker_silences": worker_silences(arrivals, owners, workers),
        "ports_unknown": round(unknown / len(ports), 4) if ports else 0.0,
    }


def largest_gap_figure(model: str) -> Callable[[dict[str, Any]], object]:
    """For bench tables: a model's largest gap, as seconds@when (refusals near it); when:
    seconds after the submission."""

    def read(row: dict[str, Any]) -> object:
        gap = row.get("quota_lost", {}).get("gaps", {}).get(model) or {}
        if not gap:
            return "-"
        return f"{gap['largest_gap_s']:.2f}@{gap['gap_at_s']:.1f} ({gap['refused_near']})"

    return read


def longest_silence_figure(row: dict[str, Any]) -> object:
    """For bench tables: the longest any worker sent nothing, as seconds@when."""
    silences = [s for s in row.get("quota_lost", {}).get("worker_silences", []) if s]
    if not silences:
        return "-"
    longest = max(silences, key=lambda s: s["silent_s"])
    return f"{longest['silent_s']:.2f}@{longest['at_s']:.1f}"
