"""Per-dimension against combined judging: latency, tokens and agreement.

    .venv/bin/python -m bench.modes [--items 40] [--panel balanced,lenient] [--n 2]

The same batch (`--items` support answers × relevance, accuracy, helpfulness and depth, the
`--panel` judges × `--n` samples at T=0.8) is judged twice through the real pipeline (an
embedded Redis, the simulator, two worker processes): once with one call per (item,
dimension, judge, sample), the default, and once with `mode: combined`, one call per (item,
judge, sample) that scores every dimension. The simulator answers with a latency that grows
with the answer: `--latency-ms` (lognormal median, the time to a first token) plus
`--ms-per-token` per completion token, so a combined answer, which holds every dimension's
score and reasoning, takes longer than one dimension's.

For each mode: calls, makespan; *latency per item*, for each (item, judge, sample), the time
until all its dimensions are scored if its calls run at once (per dimension: the slowest of
its calls; combined: its one call) and if they ran one after another (the sum); input and
output tokens per item; and the agreement of the two modes' final scores per cell (mean
absolute difference, Pearson r, same pass/fail verdict) with each mode's error against the
simulator's latent truth. A second per-dimension run gives the agreement that sampling noise
alone leaves between two runs of one mode, to read the first against. Prints a table and one
JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.common import Stack, local_stack
from jury.batchfile.loading import load_batch
from jury.local.services import wait_for
from jury.producer.submission import submit_batch
from jury.schemas.batch import Dimension
from jury.schemas.results import SampleResult, Verdict
from jury.schemas.tasks import CellRef
from jury.simulator.personas import latent_quality
from jury.store.cells import iter_verdicts
from jury.store.engine import session_factory
from jury.store.repository import batch_status
from jury.store.samples import list_samples

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

DIMENSIONS = ("relevance", "accuracy", "helpfulness", "depth")
MODES = ("per_dimension", "combined")
Cell = tuple[str, str]
# Words the support answers are made of.
_VOCABULARY = (
    "router cable restart account password reset email link settings network device firmware "
    "update support ticket billing invoice refund order delivery tracking"
)


def item_texts(n_items: int, seed: int) -> list[dict[str, str]]:
    """Support questions and answers of a realistic size (a few hundred tokens each)."""
    rng = random.Random(seed)
    vocabulary = _VOCABULARY.split(" ")
    items = []
    for i in range(n_items):
        words = [rng.choice(vocabulary) for _ in range(rng.randint(120, 260))]
        answer = f"Answer {i}: " + " ".join(words).capitalize() + "."
        question = (
            f"Question {i}: how do I fix my {rng.choice(vocabulary)} and {rng.choice(vocabulary)}?"
        )
        items.append({"id": f"i{i}", "input": question, "output": answer})
    return items


def write_batch(
    folder: Path, api_base: str, items: list[dict[str, str]], mode: str, panel: list[str], n: int
) -> Path:
    items_file = folder / "items.jsonl"
    if not items_file.exists():
        items_file.write_text("".join(json.dumps(item) + "\n" for item in items))
    batch = folder / f"{mode}.json"
    batch.write_text(
        json.dumps(
            {
                "name": f"modes {mode}",
                "judges": [{"model": f"openai/{p}", "n": n, "api_base": api_base} for p in panel],
                "dimensions": list(DIMENSIONS),
                "mode": mode,
                "items": items_file.name,
                "cache": False,  # every call made, in both modes
            }
        )
    )
    return batch


def run_mode(
    stack: Stack, folder: Path, items: list[dict[str, str]], mode: str, panel: list[str], n: int
) -> dict[str, Any]:
    sessions = session_factory(stack.settings.database_url)
    batch = write_batch(folder, stack.simulator.url, items, mode, panel, n)
    started = time.monotonic()
    batch_id = submit_batch(load_batch(batch), sessions, stack.app)
    wait_for(lambda: batch_status(sessions, batch_id).status.finished, 900, f"batch {batch_id}")
    makespan = time.monotonic() - started
    verdicts = {(v.item_id, v.criterion_id): v for v in iter_verdicts(sessions, batch_id)}
    samples: dict[str, list[tuple[str, SampleResult]]] = defaultdict(list)
    for item in items:
        for dimension in DIMENSIONS:
            cell = CellRef(batch_id, item["id"], dimension)
            samples[item["id"]] += [(dimension, s) for s in list_samples(sessions, cell)]
    return {"verdicts": verdicts, "samples": samples, "makespan_s": makespan, "mode": mode}


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def mode_figures(run: dict[str, Any]) -> dict[str, Any]:
    """Calls, latency per item and tokens per item of one mode's run."""
    combined = run["mode"] == "combined"
    parallel: list[float] = []
    sequential: list[float] = []
    prompt_tokens: list[float] = []
    completion_tokens: list[float] = []
    calls = failed = 0
    for item_samples in run["samples"].values():
        by_call: dict[tuple[str, int], list[SampleResult]] = defaultdict(list)
        for _, sample in item_samples:
            by_call[(sample.judge, sample.sample)].append(sample)
            failed += not sample.ok
        for group in by_call.values():
            latencies = [s.latency_ms for s in group]
            # A combined call's latency is on each of its samples; count it once.
            parallel.append(max(latencies))
            sequential.append(max(latencies) if combined else sum(latencies))
            calls += 1 if combined else len(group)
        prompt_tokens.append(sum(s.prompt_tokens for _, s in item_samples))
        completion_tokens.append(sum(s.completion_tokens for _, s in item_samples))
    return {
        "calls": calls,
        "failed_samples": failed,
        "makespan_s": round(run["makespan_s"], 1),
        "item_latency_parallel_ms": _rounded(_median(parallel)),
        "item_latency_sequential_ms": _rounded(_median(sequential)),
        "input_tokens_per_item": _median(prompt_tokens),
        "output_tokens_per_item": _median(completion_tokens),
    }


def _pearson(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 2 or statistics.pstdev(xs) == 0 or statistics.pstdev(ys) == 0:
        return None
    return statistics.correlation(xs, ys)


def agreement(
    first: dict[Cell, Verdict], second: dict[Cell, Verdict], truth: dict[Cell, float]
) -> dict[str, Any]:
    """How alike two runs' final scores are, and how far each is from the truth."""
    pairs = []
    for cell, verdict in first.items():
        other = second.get(cell)
        a = verdict.consensus_metrics.final_score
        b = other.consensus_metrics.final_score if other else None
        if a is not None and b is not None and other is not None:
            pairs.append((cell, a, b, verdict.passed == other.passed))
    xs, ys = [a for _, a, _, _ in pairs], [b for _, _, b, _ in pairs]
    r = _pearson(xs, ys)
    return {
        "cells_compared": len(pairs),
        "mean_abs_difference": round(
            statistics.fmean(abs(a - b) for a, b in zip(xs, ys, strict=True)), 4
        )
        if pairs
        else None,
        "pearson_r": None if r is None else round(r, 4),
        "same_verdict": round(sum(same for *_, same in pairs) / len(pairs), 4) if pairs else None,
        "mae_vs_truth": {
            "first": round(statistics.fmean(abs(a - truth[c]) for c, a, _, _ in pairs), 4)
            if pairs
            else None,
            "second": round(statistics.fmean(abs(b - truth[c]) for c, _, b, _ in pairs), 4)
            if pairs
            else None,
        },
    }


def truths(items: list[dict[str, str]], seed: int) -> dict[Cell, float]:
    found = {}
    for name in DIMENSIONS:
        scale = Dimension.model_validate(name).resolved_scale
        for item in items:
            quality = latent_quality(seed, name, item["output"].strip())
            found[(item["id"], name)] = scale.min + quality * (scale.max - scale.min)
    return found


def _fmt(value: float | None, pattern: str) -> str:
    return "—" if value is None else pattern.format(value)


def _agreement_line(label: str, agreed: dict[str, Any]) -> str:
    return (
        f"{label} over {agreed['cells_compared']} cells: mean |difference| "
        f"{_fmt(agreed['mean_abs_difference'], '{:.3f}')}, Pearson r "
        f"{_fmt(agreed['pearson_r'], '{:.3f}')}, same pass/fail verdict "
        f"{_fmt(agreed['same_verdict'], '{:.1%}')}"
    )


def print_table(
    figures: dict[str, dict[str, Any]], agreed: dict[str, Any], baseline: dict[str, Any]
) -> None:
    columns = [
        ("calls", "calls", "{:,}"),
        ("makespan s", "makespan_s", "{:.1f}"),
        ("latency/item ms", "item_latency_parallel_ms", "{:.0f}"),
        ("sequential ms", "item_latency_sequential_ms", "{:.0f}"),
        ("input tok/item", "input_tokens_per_item", "{:,.0f}"),
        ("output tok/item", "output_tokens_per_item", "{:,.0f}"),
        ("MAE vs truth", "mae", "{:.3f}"),
    ]
    header = f"{'mode':<15}" + "".join(f"{title:>17}" for title, _, _ in columns)
    print(header)
    print("-" * len(header))
    for mode, row in figures.items():
        side = "first" if mode == "per_dimension" else "second"
        row = {**row, "mae": agreed["mae_vs_truth"][side]}
        print(f"{mode:<15}" + "".join(f"{_fmt(row[k], fmt):>17}" for _, k, fmt in columns))
    print(
        "latency/item: median over (item, judge, sample) of the time until every dimension is "
        "scored, its calls running at once; sequential: one after another"
    )
    print(_agreement_line("per_dimension vs combined", agreed))
    print(_agreement_line("per_dimension vs per_dimension again (noise alone)", baseline))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=40)
    parser.add_argument("--panel", default="balanced,lenient", help="comma list of personas")
    parser.add_argument("--n", type=int, default=2, help="samples per judge")
    parser.add_argument("--seed", type=int, default=0, help="the simulator's seed")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--latency-ms", type=float, default=400.0, help="time to first token")
    parser.add_argument("--ms-per-token", type=float, default=10.0, help="decoding time")
    args = parser.parse_args()
    if args.items < 2 or args.n < 1:
        parser.error("--items must be at least 2 and --n at least 1")
    panel = [p.strip() for p in args.panel.split(",") if p.strip()]
    items = item_texts(args.items, args.seed)
    simulator_options = [
        *("--seed", str(args.seed), "--latency-ms", f"{args.latency_ms:g}"),
        *("--ms-per-token", f"{args.ms_per_token:g}"),
    ]
    runs: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="jury-bench-") as tmp:
        folder = Path(tmp)
        with local_stack(
            folder, "modes", simulator_options, args.workers, worker_concurrency=32
        ) as stack:
            for mode in MODES:
                runs[mode] = run_mode(stack, folder, items, mode, panel, args.n)
            # The same mode again: how far two runs differ by sampling noise alone.
            repeat = run_mode(stack, folder, items, "per_dimension", panel, args.n)
    figures = {mode: mode_figures(run) for mode, run in runs.items()}
    truth = truths(items, args.seed)
    agreed = agreement(runs["per_dimension"]["verdicts"], runs["combined"]["verdicts"], truth)
    baseline = agreement(runs["per_dimension"]["verdicts"], repeat["verdicts"], truth)
    print_table(figures, agreed, baseline)
    per, comb = figures["per_dimension"], figures["combined"]
    ratios = {
        "input_tokens_per_dimension_over_combined": round(
            per["input_tokens_per_item"] / comb["input_tokens_per_item"], 2
        ),
        "item_latency_parallel_change": round(
            per["item_latency_parallel_ms"] / comb["item_latency_parallel_ms"] - 1, 3
        ),
    }
    print(
        json.dumps(
            {
                "bench": "modes",
                "items": args.items,
                "dimensions": list(DIMENSIONS),
                "panel": panel,
                "n": args.n,
                "latency_ms": args.latency_ms,
                "ms_per_token": args.ms_per_token,
                "modes": figures,
                "agreement": agreed,
                "agreement_per_dimension_repeat": baseline,
                **ratios,
            }
        )
    )


if __name__ == "__main__":
    main()
