"""The baseline of bench/throughput and bench/concurrency: a plain asyncio script that calls
LiteLLM for the same judgments as bench/throughput's batch (its judges and dimensions,
asyncio.gather with a semaphore, jury's own score parsing), no Celery and no store.

It runs in a process of its own (`run_baseline_child`), which reports its whole CPU and
wall time and, on its last line, those after its imports.

    python -m bench.asyncio_baseline API_BASE [--judgments 6000] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

import psutil

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# bench/throughput's batch: its judges and dimensions, which the script judges alike.
JUDGES = ["balanced", "lenient", "strict"]
DIMENSIONS = ["relevance", "accuracy", "helpfulness", "depth", "creativity"]


async def plain_call(api_base: str, model: str, prompt: str) -> Any:
    """One call as a plain script makes it: LiteLLM's `acompletion`, no retries of its own
    (bench/ratelimit's baseline retries a 429 itself)."""
    import litellm

    return await litellm.acompletion(
        model=f"openai/{model}",
        api_base=api_base,
        api_key="x",
        messages=[{"role": "user", "content": prompt}],
        temperature=0.8,
        num_retries=0,
        max_retries=0,
    )


async def judge_all(api_base: str, judgments: int, concurrency: int) -> int:
    """The judgments, `concurrency` calls at once; prints its CPU and wall time after its
    imports as its last line."""
    import litellm  # noqa: F401  (imported before the clock starts: see below)

    from jury.schemas.batch import Scale
    from jury.worker.judging.parsing import parse_score  # the same parsing jury applies

    # What the calls cost without the process' start (`import litellm` alone is seconds of
    # CPU): jury's workers are started before a run, so this is the like-for-like figure.
    cpu_at_start, wall_at_start = time.process_time(), time.monotonic()

    scale = Scale(min=1, max=5)

    semaphore = asyncio.Semaphore(concurrency)
    parsed = 0

    async def one(n: int) -> None:
        nonlocal parsed
        judge, dimension = JUDGES[n % len(JUDGES)], DIMENSIONS[(n // 3) % len(DIMENSIONS)]
        prompt = (
            f"Criterion: {dimension}\nScale: 1 to 5\n<data-ab12>\n<output>\nAnswer {n // 45}."
            '\n</output>\n</data-ab12>\nAnswer with JSON: {"score": <number>}'
        )
        async with semaphore:
            response = await plain_call(api_base, judge, prompt)
        parse_score(response.choices[0].message.content, scale)
        parsed += 1

    await asyncio.gather(*(one(n) for n in range(judgments)))
    after_imports = {
        "cpu_s": time.process_time() - cpu_at_start,
        "wall_s": time.monotonic() - wall_at_start,
    }
    print(AFTER_IMPORTS + json.dumps(after_imports), flush=True)
    return parsed


# The baseline child's last line: its CPU and wall time after its imports.
AFTER_IMPORTS = "after imports: "


@dataclass(frozen=True)
class BaselineRun:
    """The plain-asyncio LiteLLM script's run: its whole process, and after its imports."""

    wall_s: float
    cpu_s: float
    peak_rss: int
    calls_wall_s: float
    calls_cpu_s: float


def run_baseline_child(api_base: str, judgments: int, concurrency: int) -> BaselineRun:
    """The plain-asyncio LiteLLM script in a process of its own."""
    command = [
        sys.executable,
        "-m",
        "bench.asyncio_baseline",
        api_base,
        "--judgments",
        str(judgments),
        "--concurrency",
        str(concurrency),
    ]
    return run_timed_child(command, "the asyncio baseline")


def run_timed_child(command: list[str], what: str) -> BaselineRun:
    """Run a child that prints AFTER_IMPORTS as its last line: its whole wall and CPU time,
    its peak RSS, and its figures after its imports."""
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    peak_rss, cpu = 0, 0.0
    child = psutil.Process(process.pid)
    while process.poll() is None:
        try:
            peak_rss = max(peak_rss, child.memory_info().rss)
            usage = child.cpu_times()
            cpu = usage.user + usage.system
        except psutil.NoSuchProcess:
            break
        time.sleep(0.5)
    wall = time.monotonic() - started
    output = process.stdout.read() if process.stdout else ""
    if process.wait() != 0:
        raise SystemExit(f"{what} failed")
    lines = [line for line in output.splitlines() if line.startswith(AFTER_IMPORTS)]
    after = json.loads(lines[-1].removeprefix(AFTER_IMPORTS))
    return BaselineRun(wall, cpu, peak_rss, after["wall_s"], after["cpu_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("api_base")
    parser.add_argument("--judgments", type=int, default=6000)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    asyncio.run(judge_all(args.api_base, args.judgments, args.concurrency))


if __name__ == "__main__":
    main()
