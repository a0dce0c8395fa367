"""Stability benchmark: does a panel give steadier and truer verdicts than a single judge?

    .venv/bin/python -m bench.stability [--items 60] [--runs 5] [--panel noisy@a,noisy@b,noisy@c]
                                        [--t0-noise 0,0.25,0.5]

The same batch (`--items` answers × relevance and accuracy, threshold 3.5 on 1..5) is judged
`--runs` times by each configuration, through the real pipeline: an embedded Redis, the
simulator, two worker processes. The result cache is off (`cache: false`): every run asks
the judges again, as the runs must be independent.

- `single, T=0, floor F`: one `noisy` judge, one sample, temperature 0 — the single-judge
  set-up the issue describes — once per noise floor in `--t0-noise`. The simulator scales a
  persona's noise by max(temperature, floor): real providers are not deterministic at
  temperature 0, and the floor models that. With floor 0 the judge is deterministic: its
  verdicts cannot flip, and its only error is rounding the truth to a whole score.
- `single, T=0.8`: the same judge, one sample, at jury's default temperature.
- `panel`: the `--panel` judges (default three `noisy` judges), `--n` samples each, T=0.8.

For each: the verdict flip rate (for each cell, the share of run pairs whose pass/fail
verdicts differ, averaged over cells), the share of cells whose verdict changed in any run,
the spread of a cell's final score across runs, and the error against the simulator's latent
truth: mean absolute error of the final score, and the share of verdicts on the other side of
the threshold from the truth. Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

from bench.common import Stack, local_stack, simulator_stats
from jury.analysis.agreement import batch_agreement
from jury.batchfile.loading import load_batch
from jury.local.services import wait_for
from jury.producer.submission import submit_batch
from jury.schemas.batch import Dimension
from jury.schemas.results import Verdict
from jury.simulator.personas import latent_quality
from jury.store.cells import iter_verdicts
from jury.store.engine import session_factory
from jury.store.repository import batch_status

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

DIMENSIONS = ("relevance", "accuracy")
Cell = tuple[str, str]


@dataclass(frozen=True)
class Configuration:
    key: str  # names its batch file
    label: str
    personas: tuple[str, ...]
    n: int
    temperature: float
    t0_noise: float | None = None  # the simulator's noise floor for these judges


def floor_model(persona: str, floor: float) -> str:
    """The judge's model name for one noise floor: the simulator sets floors per model."""
    return f"{persona}@floor{floor:g}"


@dataclass
class RunResult:
    verdicts: dict[Cell, Verdict]
    seconds: float
    alpha_interval: float | None


def item_outputs(n_items: int) -> dict[str, str]:
    # Distinct texts give distinct latent qualities; no surrounding whitespace, as the
    # simulator strips the output before hashing it.
    return {
        f"i{i}": f"Answer {i}: restart the router, then check the cable." for i in range(n_items)
    }


def truths(outputs: dict[str, str], seed: int) -> dict[Cell, float]:
    """The latent score of every cell on its dimension's scale."""
    found: dict[Cell, float] = {}
    for name in DIMENSIONS:
        scale = Dimension.model_validate(name).resolved_scale
        for item_id, text in outputs.items():
            quality = latent_quality(seed, name, text)
            found[(item_id, name)] = scale.min + quality * (scale.max - scale.min)
    return found


def write_batch(
    folder: Path, api_base: str, outputs: dict[str, str], config: Configuration
) -> Path:
    items = folder / "items.jsonl"
    if not items.exists():
        items.write_text(
            "".join(json.dumps({"id": i, "output": text}) + "\n" for i, text in outputs.items())
        )
    judges = [
        {
            "model": f"openai/{persona}",
            "n": config.n,
            "temperature": config.temperature,
            "api_base": api_base,
        }
        for persona in config.personas
    ]
    batch = folder / f"{config.key}.json"
    batch.write_text(
        json.dumps(
            {
                "name": f"stability {config.label}",
                "judges": judges,
                "dimensions": list(DIMENSIONS),
                "items": items.name,
                "cache": False,  # independent runs: no answer reused from an earlier one
            }
        )
    )
    return batch


def run_once(
    stack: Stack, folder: Path, outputs: dict[str, str], config: Configuration
) -> RunResult:
    sessions = session_factory(stack.settings.database_url)
    started = time.monotonic()
    batch = write_batch(folder, stack.simulator.url, outputs, config)
    batch_id = submit_batch(load_batch(batch), sessions, stack.app)
    wait_for(lambda: batch_status(sessions, batch_id).status.finished, 900, f"batch {batch_id}")
    seconds = time.monotonic() - started
    verdicts = {(v.item_id, v.criterion_id): v for v in iter_verdicts(sessions, batch_id)}
    return RunResult(verdicts, seconds, batch_agreement(verdicts.values()).overall.alpha_interval)


def stability(
    runs: list[RunResult], truth: dict[Cell, float], thresholds: dict[str, float]
) -> dict[str, Any]:
    """Flip rate and spread between runs, error against the truth, for one configuration."""
    flip_rates: list[float] = []
    changed = 0
    spreads: list[float] = []
    errors: list[float] = []
    wrong = judged = missing = 0
    for cell, true_score in truth.items():
        verdicts = [run.verdicts.get(cell) for run in runs]
        scores = [v.consensus_metrics.final_score for v in verdicts if v is not None]
        finals = [s for s in scores if s is not None]
        missing += len(runs) - len(finals)
        passes = [v.passed for v in verdicts if v is not None and v.passed is not None]
        pairs = list(combinations(passes, 2))
        if pairs:
            flip_rates.append(sum(a != b for a, b in pairs) / len(pairs))
            changed += len(set(passes)) > 1
        if len(finals) > 1:
            spreads.append(statistics.stdev(finals))
        errors += [abs(s - true_score) for s in finals]
        wrong += sum(p != (true_score >= thresholds[cell[1]]) for p in passes)
        judged += len(passes)
    alphas = [r.alpha_interval for r in runs if r.alpha_interval is not None]
    return {
        "flip_rate": round(statistics.fmean(flip_rates), 4) if flip_rates else None,
        "cells_changed": round(changed / len(truth), 4),
        "score_spread": round(statistics.fmean(spreads), 4) if spreads else None,
        "mae": round(statistics.fmean(errors), 4) if errors else None,
        "wrong_verdicts": round(wrong / judged, 4) if judged else None,
        "missing_verdicts": missing,
        "alpha_interval": round(statistics.fmean(alphas), 3) if alphas else None,
        "seconds_per_run": round(statistics.fmean(r.seconds for r in runs), 1),
    }


def print_table(results: dict[str, dict[str, Any]], calls: dict[str, int]) -> None:
    columns = [
        ("flip rate", "flip_rate", "{:.1%}"),
        ("cells changed", "cells_changed", "{:.1%}"),
        ("score spread", "score_spread", "{:.3f}"),
        ("MAE vs truth", "mae", "{:.3f}"),
        ("wrong verdicts", "wrong_verdicts", "{:.1%}"),
        ("α interval", "alpha_interval", "{:.2f}"),
        ("calls/cell", "calls_per_cell", "{}"),
        ("s/run", "seconds_per_run", "{:.1f}"),
    ]
    header = f"{'configuration':<26}" + "".join(f"{title:>15}" for title, _, _ in columns)
    print(header)
    print("-" * len(header))
    for label, row in results.items():
        row = {**row, "calls_per_cell": calls[label]}
        cells = ["—" if row[key] is None else fmt.format(row[key]) for _, key, fmt in columns]
        print(f"{label:<26}" + "".join(f"{cell:>15}" for cell in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=60)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--panel", default="noisy@a,noisy@b,noisy@c", help="comma list of personas")
    parser.add_argument("--n", type=int, default=3, help="samples per panel judge")
    parser.add_argument("--single", default="noisy", help="the single judge's persona")
    parser.add_argument("--seed", type=int, default=0, help="the simulator's seed")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--t0-noise",
        default="0,0.25,0.5",
        help="comma list of noise floors for the single judge at T=0, in temperature units",
    )
    args = parser.parse_args()
    if args.runs < 2 or args.items < 1:
        parser.error("--runs must be at least 2 (flips are between runs) and --items at least 1")
    try:
        floors = [float(f) for f in args.t0_noise.split(",") if f.strip()]
    except ValueError:
        floors = [-1.0]
    if not floors or any(not 0 <= f <= 2 for f in floors):
        parser.error("--t0-noise must be a comma list of numbers in [0, 2]")
    panel = tuple(p.strip() for p in args.panel.split(",") if p.strip())
    configurations = [
        Configuration(
            f"single-t0-floor{f:g}",
            f"single, T=0, floor {f:g}",
            (floor_model(args.single, f),),
            1,
            0.0,
            f,
        )
        for f in floors
    ]
    configurations += [
        Configuration("single-t08", "single, T=0.8", (args.single,), 1, 0.8),
        Configuration("panel", f"panel {len(panel)}×{args.n}, T=0.8", panel, args.n, 0.8),
    ]
    simulator_options = ["--seed", str(args.seed)]
    for config in configurations:
        if config.t0_noise is not None:
            simulator_options += ["--t0-noise", f"{config.personas[0]}={config.t0_noise:g}"]
    outputs = item_outputs(args.items)
    truth = truths(outputs, args.seed)
    thresholds = {name: Dimension.model_validate(name).resolved_threshold for name in DIMENSIONS}
    runs: dict[str, list[RunResult]] = {c.label: [] for c in configurations}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="jury-bench-") as tmp:
        folder = Path(tmp)
        with local_stack(
            folder, "stability", simulator_options, args.workers, worker_concurrency=32
        ) as stack:
            # Round-robin, so that anything drifting during the benchmark touches every
            # configuration alike.
            for run in range(args.runs):
                for config in configurations:
                    runs[config.label].append(run_once(stack, folder, outputs, config))
                print(f"round {run + 1}/{args.runs} done", flush=True)
            total_calls = int(simulator_stats(stack.simulator)["total"])
    results = {label: stability(r, truth, thresholds) for label, r in runs.items()}
    calls = {c.label: len(c.personas) * c.n for c in configurations}
    print()
    print_table(results, calls)
    print(
        f"\n{args.items} items × {len(DIMENSIONS)} dimensions = {len(truth)} cells, "
        f"{args.runs} runs each; {total_calls} judge calls in {time.monotonic() - started:.0f} s"
    )
    print(
        json.dumps(
            {
                "bench": "stability",
                "items": args.items,
                "dimensions": list(DIMENSIONS),
                "runs": args.runs,
                "seed": args.seed,
                "single": args.single,
                "t0_noise": floors,
                "panel": list(panel),
                "panel_n": args.n,
                "judge_calls": total_calls,
                "results": {
                    label: {**row, "calls_per_cell": calls[label]} for label, row in results.items()
                },
            }
        )
    )


if __name__ == "__main__":
    main()
