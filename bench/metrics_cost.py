"""What recording metrics costs, for bench/throughput: the same batch with the workers' metrics
on (JURY_METRICS_PORT, each worker scraped every SCRAPE_INTERVAL_S as Prometheus would) and
off, paired round by round; and the recording alone, timed in this process.

The pairs vary with the machine's load by more than the recording costs, so the timing of
the recording itself (a gated call through `watch_call`, on against off) is the precise
figure, and the pairs the check that nothing else came with it (the scrapes, the server's
thread).
"""

from __future__ import annotations

import asyncio
import socket
import statistics
import threading
import time
import urllib.request
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from jury.schemas.batch import Judge
from jury.worker.metrics import recording

SCRAPE_INTERVAL_S = 5.0
METRICS_LABEL = "-metrics"


def free_port_range(count: int) -> str:
    """JURY_METRICS_PORT for `count` workers: a range of that many ports free now."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = int(probe.getsockname()[1])
        if first + count > 65535:
            continue
        if all(_free(port) for port in range(first, first + count)):
            return f"{first}-{first + count - 1}"
    raise RuntimeError(f"no {count} free ports in a row")


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class Scraper(threading.Thread):
    """Scrapes every worker's /metrics every SCRAPE_INTERVAL_S, as Prometheus would."""

    def __init__(self, ports: range) -> None:
        super().__init__(daemon=True)
        self.urls = [f"http://127.0.0.1:{port}/metrics" for port in ports]
        self.stopped = threading.Event()
        self.scrapes = 0
        self.bytes = 0

    def run(self) -> None:
        while not self.stopped.wait(SCRAPE_INTERVAL_S):
            self.scrape_all()

    def scrape_all(self) -> list[str]:
        pages = []
        for url in self.urls:
            with urllib.request.urlopen(url, timeout=10) as answer:
                page = answer.read().decode()
            self.scrapes += 1
            self.bytes += len(page)
            pages.append(page)
        return pages

    def calls(self) -> float:
        """Every call the workers counted, all outcomes, at a last scrape."""
        return sum(
            sample.value
            for page in self.scrape_all()
            for family in text_string_to_metric_families(page)
            if family.name == "jury_calls"
            for sample in family.samples
            if sample.name == "jury_calls_total"
        )


@dataclass(frozen=True)
class _Reply:
    text: str = '{"score": 4}'
    prompt_tokens: int = 180
    completion_tokens: int = 25
    cost_usd: float = 0.0001
    latency_ms: float = 3.0


async def _answer() -> _Reply:
    return _Reply()


def recording_cost(calls: int = 100_000, rounds: int = 5) -> dict[str, float]:
    """CPU microseconds a call's recording costs (watch_call, the slot-wait and in-flight
    blocks, on against off), the least of `rounds` rounds each way."""
    judge = Judge(model="openai/bench", rpm=60_000)

    async def many() -> None:
        for _ in range(calls):
            with recording.slot_waited(judge):
                pass
            with recording.in_flight(judge):
                await recording.watch_call(judge, _answer())

    def cpu_us_per_call() -> float:
        started = time.process_time()
        asyncio.run(many())
        return (time.process_time() - started) * 1e6 / calls

    off, on = [], []
    for _ in range(rounds):
        recording.switch_off()
        off.append(cpu_us_per_call())
        recording.switch_on(CollectorRegistry())
        on.append(cpu_us_per_call())
    recording.switch_off()
    return {
        "us_per_call_off": round(min(off), 3),
        "us_per_call_on": round(min(on), 3),
        "recording_us_per_call": round(min(on) - min(off), 3),
    }


def metrics_pairs(rows: list[dict[str, Any]], plain: str) -> list[dict[str, float]]:
    """Each plain jury run with the metrics run of its round (in either order): on / off."""
    pairs: list[dict[str, float]] = []
    waiting: dict[str, dict[str, Any]] = {}
    for row in rows:
        kind = "on" if row["run"] == plain + METRICS_LABEL else "off" if row["run"] == plain else ""
        if not kind:
            continue
        other = "off" if kind == "on" else "on"
        if other in waiting:
            on, off = (row, waiting.pop(other)) if kind == "on" else (waiting.pop(other), row)
            pairs.append(
                {
                    "workers_cpu_ratio": round(
                        on["cpu_ms"]["workers"] / off["cpu_ms"]["workers"], 3
                    ),
                    "speed_ratio": round(on["judgments_per_s"] / off["judgments_per_s"], 3),
                }
            )
        else:
            waiting[kind] = row
    return pairs


def print_metrics_pairs(pairs: list[dict[str, float]], cost: dict[str, float] | None) -> None:
    print("\nmetrics on / off, pair by pair: workers' CPU per judgment (target <= 1.03), speed")
    for n, pair in enumerate(pairs, 1):
        print(f"  pair {n}: CPU {pair['workers_cpu_ratio']:.3f}  speed {pair['speed_ratio']:.3f}")
    if pairs:
        median = statistics.median(p["workers_cpu_ratio"] for p in pairs)
        print(f"  median: CPU {median:.3f}")
    if cost:
        print(
            f"  recording alone: {cost['recording_us_per_call']:.2f} µs of CPU per call "
            f"({cost.get('share_of_judgment_pct', '-')} % of a worker's CPU per judgment)"
        )
