"""The bare-transport floor of bench/throughput: what a call costs with nothing but the wire.

One process, asyncio and aiohttp only: per judgment, one POST of a chat completion to the
simulator (the baseline's prompt, `concurrency` at once over one session) and one JSON parse of
the reply, its text read out. No LiteLLM, no Celery, no store, no score parsing: no judging
system can spend less CPU per call over HTTP, so jury's CPU per judgment is printed as a
multiple of it. Timed after its imports, as the baseline is.

    python -m bench.transport_floor API_BASE [--calls 6000] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from bench.asyncio_baseline import AFTER_IMPORTS, DIMENSIONS, JUDGES, run_timed_child

FLOOR_LABEL = "floor"
FLOOR_CPU = "floor process, after its imports"


async def post_all(api_base: str, calls: int, concurrency: int) -> int:
    import aiohttp

    cpu_at_start, wall_at_start = time.process_time(), time.monotonic()
    semaphore = asyncio.Semaphore(concurrency)
    url = api_base.rstrip("/") + "/chat/completions"
    headers = {"Authorization": "Bearer x", "Content-Type": "application/json"}
    read = 0
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(n: int) -> None:
            nonlocal read
            judge, dimension = JUDGES[n % len(JUDGES)], DIMENSIONS[(n // 3) % len(DIMENSIONS)]
            prompt = (
                f"Criterion: {dimension}\nScale: 1 to 5\n<data-ab12>\n<output>\nAnswer {n // 45}."
                '\n</output>\n</data-ab12>\nAnswer with JSON: {"score": <number>}'
            )
            body = json.dumps(
                {
                    "model": judge,
                    "messages": [{"role": "user", "content": prompt}],
                    "temperature": 0.8,
                }
            )
            async with semaphore, session.post(url, data=body, headers=headers) as response:
                reply = json.loads(await response.read())
            if response.status != 200 or not reply["choices"][0]["message"]["content"]:
                raise SystemExit(f"call {n}: {response.status}")
            read += 1

        await asyncio.gather(*(one(n) for n in range(calls)))
    after = {
        "cpu_s": time.process_time() - cpu_at_start,
        "wall_s": time.monotonic() - wall_at_start,
    }
    print(AFTER_IMPORTS + json.dumps(after), flush=True)
    return read


def run_floor(api_base: str, calls: int, concurrency: int) -> dict[str, Any]:
    """The floor in a process of its own: bench/throughput's row for it."""
    command = [sys.executable, "-m", "bench.transport_floor", api_base, "--calls", str(calls)]
    command += ["--concurrency", str(concurrency)]
    run = run_timed_child(command, "the transport floor")
    return {
        "run": FLOOR_LABEL,
        "judgments": calls,
        "wall_s": round(run.calls_wall_s, 1),
        "judgments_per_s": round(calls / run.calls_wall_s),
        "cpu_ms": {FLOOR_CPU: round(1000 * run.calls_cpu_s / calls, 3)},
        "peak_worker_rss_mb": round(run.peak_rss / 2**20, 1),
    }


def floor_multiples(rows: list[dict[str, Any]], jury_cpu_ms: Any) -> dict[str, float]:
    """Each jury run's CPU per judgment (every jury process) as a multiple of the floor's CPU
    per call, and the baseline's (its calls, after its imports) likewise; {} without a floor."""
    floors = [r["cpu_ms"][FLOOR_CPU] for r in rows if r["run"] == FLOOR_LABEL]
    if not floors:
        return {}
    floor = sum(floors) / len(floors)
    multiples = {}
    for row in rows:
        if row["run"].startswith("jury-") and "cpu_ms" in row:
            multiples[row["run"]] = round(jury_cpu_ms(row) / floor, 2)
        elif row["run"] != FLOOR_LABEL:
            after = next(
                (v for k, v in row.get("cpu_ms", {}).items() if k.startswith("baseline, after")),
                None,
            )
            if after is not None:
                multiples["asyncio baseline (after its imports)"] = round(after / floor, 2)
    if multiples:
        print(f"\nthe bare-transport floor (aiohttp POST + JSON parse): {floor:.3f} ms per call")
        for run, multiple in multiples.items():
            print(f"  {run}: {multiple:.2f}× the floor")
    return multiples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("api_base")
    parser.add_argument("--calls", type=int, default=6000)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    asyncio.run(post_all(args.api_base, args.calls, args.concurrency))


if __name__ == "__main__":
    main()
