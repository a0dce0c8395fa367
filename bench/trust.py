"""Trust benchmark: does the panel help, what is it worth, and does calibration help?

    .venv/bin/python -m bench.trust [--items 120] [--n 3] [--seed 11]
    .venv/bin/python -m bench.trust --real-api-base http://127.0.0.1:8080/v1 \\
        [--real-model openai/smollm2] [--real-items 110]

On the simulator, through the real pipeline (an embedded Redis, the simulator, two workers):
`--items` answers judged on relevance (1–5) by three panels of `--n` samples per judge at
T=0.8, every item labelled by simulated people (simulator.labels: the latent truth plus rater
noise, three raters averaged):

- `correlated`: balanced, lenient and strict judges in one bias group (`persona:family`):
  they misjudge the same items the same way;
- `independent`: the same personas, each in a bias group of its own;
- `robust`: three unbiased `balanced` judges, each in a group of its own, plus `maximal`, a
  judge that always answers 5, aggregated by `geometric_median` (and, from the same records,
  by mean, median and trimmed mean).

For each: the effective number of judges (Kish, from the correlation of the judges' errors
against the labels) and of independent opinions (from their scores), the panel against its
best judge with the bootstrap interval of the difference, and on held-out items (half the
items, by a hash of the id) the error of the raw and the calibrated scores, the calibration
fitted on the other half (schemas.calibration_fit). Prints a table and one JSON line.

With `--real-api-base`, instead: the HHH pairs of jury/examples/hhh_pairwise_items.jsonl
(real people's preferences) judged by the model behind that OpenAI-compatible server, and its
accuracy against people, overall and per category.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from bench.common import local_stack, print_runs
from jury.analysis.calibration import calibrate_scores, fit_calibration, fold_of
from jury.analysis.trust import trust_report
from jury.batchfile.loading import load_batch
from jury.local.services import wait_for
from jury.producer.submission import submit_batch
from jury.results.labelled import read_records
from jury.schemas.results import Verdict
from jury.schemas.trust_records import TrustRecords
from jury.simulator.labels import human_score
from jury.stats.measures import mean_absolute_error
from jury.store.engine import session_factory
from jury.store.repository import batch_status
from jury.worker.judging.aggregation import aggregate_across_models

EXAMPLES = Path(__file__).resolve().parent.parent / "jury" / "examples"
DIMENSION = "relevance"
PANELS: dict[str, tuple[str, ...]] = {
    "correlated": ("balanced:family", "lenient:family", "strict:family"),
    "independent": ("balanced:a", "lenient:b", "strict:c"),
    "robust": ("balanced:a", "balanced:b", "balanced:c", "maximal"),
}
ROBUST_METHODS = ("mean", "median", "trimmed_mean", "geometric_median")


def labelled_items(n_items: int, seed: int, label_seed: int) -> list[dict[str, Any]]:
    rng = random.Random(label_seed)
    items = []
    for i in range(n_items):
        text = f"Answer {i}: restart the router, then check the cable."
        label = human_score(seed, DIMENSION, text, 1, 5, rng=rng)
        items.append({"id": f"i{i}", "output": text, "labels": {DIMENSION: label}})
    return items


def run_batch(stack: Any, folder: Path, spec: dict[str, Any], timeout: float) -> list[Verdict]:
    path = folder / f"{spec['name']}.yaml"
    path.write_text(yaml.safe_dump(spec))
    sessions = session_factory(stack.settings.database_url)
    batch_id = submit_batch(load_batch(path), sessions, stack.app)
    wait_for(lambda: batch_status(sessions, batch_id).status.finished, timeout, batch_id)
    return list(read_records(sessions, batch_id))


def _mae_of(verdicts: Iterable[Verdict], score: Callable[[Verdict], float | None]) -> float | None:
    pairs = [(score(v), v.human_label) for v in verdicts]
    kept = [(s, float(y)) for s, y in pairs if s is not None and isinstance(y, int | float)]
    return mean_absolute_error([s for s, _ in kept], [y for _, y in kept])


def _judge_score(judge: str) -> Callable[[Verdict], float | None]:
    return lambda verdict: verdict.llm_evaluations[judge].aggregated_score


def held_out_calibration(verdicts: list[Verdict], seed: int) -> dict[str, float | None]:
    """Fit on the items of fold 0, measure on fold 1: raw and calibrated errors."""
    train = [v for v in verdicts if fold_of(v.item_id, 2, seed) == 0]
    test = [v for v in verdicts if fold_of(v.item_id, 2, seed) == 1]
    records = TrustRecords()
    for verdict in train:
        records.add(verdict)
    calibration = fit_calibration(records, {DIMENSION: (1.0, 5.0)}, seed=seed)

    def calibrated(verdict: Verdict) -> Any:
        scores = {
            j: e.aggregated_score
            for j, e in verdict.llm_evaluations.items()
            if e.aggregated_score is not None
        }
        return calibrate_scores(calibration, DIMENSION, scores, verdict.threshold)

    judges = list(test[0].llm_evaluations) if test else []
    raw_judges = [
        _mae_of(test, lambda v, j=j: v.llm_evaluations[j].aggregated_score)  # type: ignore[misc]
        for j in judges
    ]
    calibrated_judges = [
        _mae_of(test, lambda v, j=j: calibrated(v).judges.get(j))  # type: ignore[misc]
        for j in judges
    ]
    return {
        "held_out_items": len(test),
        "panel_raw_mae": _mae_of(test, lambda v: v.consensus_metrics.final_score),
        "panel_calibrated_mae": _mae_of(test, lambda v: calibrated(v).final_score),
        "judges_raw_mae": statistics.fmean(x for x in raw_judges if x is not None),
        "judges_calibrated_mae": statistics.fmean(x for x in calibrated_judges if x is not None),
    }


def robust_errors(verdicts: list[Verdict]) -> dict[str, float | None]:
    """Each pooling method's error against the labels, from the same judge scores."""
    found: dict[str, float | None] = {}
    for method in ROBUST_METHODS:

        def pooled(verdict: Verdict, method: str = method) -> float | None:
            scores = {
                j: e.aggregated_score
                for j, e in verdict.llm_evaluations.items()
                if e.aggregated_score is not None
            }
            return aggregate_across_models(scores, {}, method)

        found[f"mae_{method}"] = _mae_of(verdicts, pooled)
    return found


def panel_figures(name: str, verdicts: list[Verdict], seed: int) -> dict[str, Any]:
    records = TrustRecords()
    for verdict in verdicts:
        records.add(verdict)
    trust = trust_report(records, seed=seed).dimensions[DIMENSION]
    comparison = trust.comparison
    advantage = comparison.advantage if comparison else None
    row: dict[str, Any] = {
        "panel": name,
        "judges": len(trust.raters) - 1,
        "labelled": trust.n_labelled,
        "effective_judges": _round(trust.effective_from_errors.value)
        if trust.effective_from_errors
        else None,
        "independent_opinions": _round(trust.effective_from_scores.value)
        if trust.effective_from_scores
        else None,
        "best_judge": comparison.best_judge if comparison else None,
        "best_judge_mae": _round(comparison.best) if comparison else None,
        "panel_mae": _round(comparison.panel) if comparison else None,
        "advantage": _round(advantage.value) if advantage else None,
        "advantage_low": _round(advantage.low) if advantage else None,
        "advantage_high": _round(advantage.high) if advantage else None,
        "finding": comparison.finding if comparison else None,
    }
    row.update({k: _round(v) for k, v in held_out_calibration(verdicts, seed).items()})
    if name == "robust":
        row.update({k: _round(v) for k, v in robust_errors(verdicts).items()})
    return row


def _round(value: float | int | None) -> float | int | None:
    return round(value, 3) if isinstance(value, float) else value


def shown(key: str) -> Callable[[dict[str, Any]], object]:
    """Read `key` off a row, '-' where it is missing or None."""
    return lambda row: "-" if row.get(key) is None else row[key]


def simulated(args: argparse.Namespace) -> None:
    items = labelled_items(args.items, args.seed, args.label_seed)
    rows = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="jury-bench-") as tmp:
        folder = Path(tmp)
        options = ["--seed", str(args.seed), "--group-error", str(args.group_error)]
        with local_stack(folder, "trust", options, 2, worker_concurrency=32) as stack:
            for name, personas in PANELS.items():
                spec = {
                    "name": f"trust-{name}",
                    "judges": [
                        {"model": f"openai/{p}", "n": args.n, "api_base": stack.simulator.url}
                        for p in personas
                    ],
                    "dimensions": [DIMENSION],
                    "aggregation": {
                        "across_models": "geometric_median" if name == "robust" else "mean"
                    },
                    "cache": False,
                    "items": items,
                }
                verdicts = run_batch(stack, folder, spec, 900)
                rows.append(panel_figures(name, verdicts, args.seed))
                print(f"{name} done", flush=True)
    print()
    print_runs(
        rows,
        "panel",
        [
            (label, shown(key))
            for label, key in (
                ("judges", "judges"),
                ("effective judges (errors)", "effective_judges"),
                ("independent opinions", "independent_opinions"),
                ("best judge", "best_judge"),
                ("best judge MAE", "best_judge_mae"),
                ("panel MAE", "panel_mae"),
                ("panel advantage", "advantage"),
                ("  95% interval low", "advantage_low"),
                ("  95% interval high", "advantage_high"),
                ("finding", "finding"),
                ("held-out items", "held_out_items"),
                ("held-out panel MAE raw", "panel_raw_mae"),
                ("  calibrated", "panel_calibrated_mae"),
                ("held-out judge MAE raw", "judges_raw_mae"),
                ("  calibrated", "judges_calibrated_mae"),
                *((f"MAE, {m}", f"mae_{m}") for m in ROBUST_METHODS),
            )
        ],
        label_width=28,
        width=20,
    )
    print(
        f"\n{args.items} items × {DIMENSION}, {args.n} samples per judge, T=0.8, simulator seed "
        f"{args.seed}, group error {args.group_error}; {time.monotonic() - started:.0f} s"
    )
    document = {
        "bench": "trust",
        "items": args.items,
        "n": args.n,
        "seed": args.seed,
        "group_error": args.group_error,
        "panels": {row["panel"]: row for row in rows},
    }
    print(json.dumps(document))


def real(args: argparse.Namespace) -> None:
    """The HHH pairs judged by a real model, and its accuracy against people."""
    example = yaml.safe_load((EXAMPLES / "hhh_pairwise.yaml").read_text())
    lines = (EXAMPLES / "hhh_pairwise_items.jsonl").read_text().splitlines()
    items = [json.loads(line) for line in lines if line.strip()][: args.real_items]
    judge = {
        "model": args.real_model,
        "api_base": args.real_api_base,
        "n": args.real_n,
        "temperature": args.real_temperature,
        "max_tokens": args.real_max_tokens,
        "timeout_s": args.real_timeout_s,
    }
    spec = {**example, "name": "hhh-real", "judges": [judge], "items": items, "cache": False}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="jury-bench-") as tmp:
        folder = Path(tmp)
        with local_stack(folder, "trust-real", ["--seed", "0"], 1, worker_concurrency=4) as stack:
            verdicts = run_batch(stack, folder, spec, args.real_wait_s)
    records = TrustRecords()
    for verdict in verdicts:
        records.add(verdict)
    trust = trust_report(records, seed=args.seed).dimensions["hhh"]
    judge_row = next(r for r in trust.raters if r.rater != "panel")
    accuracy = judge_row.accuracy
    by_category: dict[str, list[float]] = {}
    category = {item["id"]: item["metadata"]["category"] for item in items}
    for record in records.dimensions["hhh"].labelled:
        side = record.panel_winner
        if side is None:
            continue
        credit = 1.0 if side == record.side_label else 0.5 if side == "tie" else 0.0
        by_category.setdefault(category[record.item_id], []).append(credit)
    winners = [v.pairwise.winner if v.pairwise else None for v in verdicts]
    outcomes = [v.pairwise for v in verdicts if v.pairwise is not None]
    judgments = sum(o.n_judgments for o in outcomes)
    consistent = sum(o.n_position_consistent for o in outcomes)
    figures = {
        "bench": "trust-real",
        "model": args.real_model,
        "api_base": args.real_api_base,
        "pairs": len(items),
        "judged": sum(w is not None for w in winners),
        "ties": winners.count("tie"),
        "accuracy": _round(accuracy.value) if accuracy else None,
        "accuracy_low": _round(accuracy.low) if accuracy else None,
        "accuracy_high": _round(accuracy.high) if accuracy else None,
        "by_category": {k: _round(statistics.fmean(v)) for k, v in sorted(by_category.items())},
        "position_consistency": _round(consistent / judgments) if judgments else None,
        "failed_samples": sum(e.n_failed for v in verdicts for e in v.llm_evaluations.values()),
        "seconds": round(time.monotonic() - started, 1),
    }
    for key, value in figures.items():
        print(f"{key:<16} {value}")
    print(json.dumps(figures))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=120)
    parser.add_argument("--n", type=int, default=3, help="samples per judge")
    parser.add_argument("--seed", type=int, default=11, help="the simulator's seed")
    parser.add_argument("--label-seed", type=int, default=0, help="the raters' noise seed")
    parser.add_argument("--group-error", type=float, default=0.2)
    parser.add_argument("--real-api-base", help="an OpenAI-compatible server to measure")
    parser.add_argument("--real-model", default="openai/smollm2")
    parser.add_argument("--real-items", type=int, default=110)
    parser.add_argument("--real-n", type=int, default=1)
    parser.add_argument("--real-temperature", type=float, default=0.0)
    parser.add_argument("--real-max-tokens", type=int, default=200)
    parser.add_argument("--real-timeout-s", type=float, default=120)
    parser.add_argument("--real-wait-s", type=float, default=7200)
    args = parser.parse_args()
    if args.items < 20:
        parser.error("--items must be at least 20 (half are held out for calibration)")
    if args.real_api_base:
        real(args)
    else:
        simulated(args)


if __name__ == "__main__":
    main()
