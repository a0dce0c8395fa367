"""bench/ratelimit's figures: the batch's plan and ideal makespan, per-model use of the quota,
where the makespan went, the pairing of each throttled run with its unthrottled one, and the
table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.arrivals import largest_gap_figure, longest_silence_figure
from bench.common import figure, print_runs

MODELS = {"balanced@fast": 1200, "lenient@mid": 600, "strict@slow": 300}
LATENCY = ["--latency-ms", "400", "--latency-sigma", "0.2"]
DIMENSIONS = ["relevance", "accuracy", "helpfulness"]


def plan(minutes: float) -> tuple[int, dict[str, int]]:
    """Items, and samples per item and dimension for each model (4, 2, 1), so that each
    model's calls take `minutes` at its quota."""
    n = {"balanced@fast": 4, "lenient@mid": 2, "strict@slow": 1}
    items = max(1, round(MODELS["strict@slow"] * minutes / len(DIMENSIONS)))
    return items, n


def ideal_makespan(items: int, n: dict[str, int]) -> float:
    cells = items * len(DIMENSIONS)
    return max(cells * n[m] / rpm * 60 for m, rpm in MODELS.items())


# The start of a run whose use of each quota is printed apart.
FIRST_SECONDS = 5


def model_figures(stats: dict[str, Any], makespan: float) -> dict[str, dict[str, float]]:
    """Per model: its quota's use over the whole makespan (submission to the last verdict),
    and while the provider was answering it (its first to its latest answer: the limiter's
    own share, without the batch's start and end), and in its first FIRST_SECONDS (a start
    that keeps the workers busy leaves calls late for their slots, and each is quota lost)."""
    figures = {}
    for model, rpm in MODELS.items():
        counts = stats["models"].get(model, {})
        ok, throttled = counts.get("200", 0), counts.get("429", 0)
        total = sum(v for k, v in counts.items() if k.isdigit())
        first, last = stats.get("answered_s", {}).get(model, (0.0, 0.0))
        figures[model] = {
            "rpm": rpm,
            "calls_ok": ok,
            "answered_429": throttled,
            "utilisation": round(ok / (rpm * makespan / 60), 3) if makespan else 0.0,
            "use_while_answering": (
                round((ok - 1) / (rpm * (last - first) / 60), 3) if last > first else 0.0
            ),
            "share_429": round(throttled / total, 4) if total else 0.0,
            "use_first_seconds": round(
                sum(stats.get("answered_per_s", {}).get(model, [])[:FIRST_SECONDS])
                / (rpm / 60 * FIRST_SECONDS),
                3,
            ),
            **_leanest_second(stats.get("answered_per_s", {}).get(model, []), rpm),
        }
    return figures


def _leanest_second(per_second: list[int], rpm: int) -> dict[str, float]:
    """The fewest answers in one whole second between the model's first and last (a stall
    shows as one lean second; a pace a little slow, as none), as a share of its quota."""
    inner = per_second[1:-1]
    if not inner:
        return {}
    fewest = min(inner)
    return {"leanest_second": round(fewest / (rpm / 60), 2), "at_s": 1 + inner.index(fewest)}


def with_unthrottled(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Beside each throttled jury run, the CPU per judgment of the unthrottled run with as many
    workers in this invocation, and the ratio of the two."""
    free = {r["workers"]: r for r in rows if r.get("quota") is False}
    for row in rows:
        other = free.get(row.get("workers")) if row.get("quota") else None
        if other and other.get("cpu_ms_per_judgment") and row.get("cpu_ms_per_judgment"):
            row["unthrottled_cpu_ms_per_judgment"] = other["cpu_ms_per_judgment"]
            row["cpu_ratio_to_unthrottled"] = round(
                row["cpu_ms_per_judgment"] / other["cpu_ms_per_judgment"], 2
            )
    return rows


def start_and_end(stats: dict[str, Any], submitted: float, makespan: float) -> dict[str, float]:
    """Where the makespan went besides the provider's answering: from the submission to the
    first answer, and from the last answer to the batch's end (storing, the last verdicts)."""
    spans = list(stats.get("answered_s", {}).values())
    if not spans:
        return {}
    first, last = min(s[0] for s in spans), max(s[1] for s in spans)
    return {
        "to_first_request_s": round(stats["first_request_s"] - submitted, 2),
        "to_first_answer_s": round(first - submitted, 2),
        "after_last_answer_s": round(makespan - (last - submitted), 2),
    }


def run_row(
    label: str,
    makespan: float,
    items: int,
    n: dict[str, int],
    stats: dict[str, Any],
    retries: int,
    deferrals: int,
) -> dict[str, Any]:
    ideal = ideal_makespan(items, n)
    models = model_figures(stats, makespan)
    calls = sum(sum(v for k, v in c.items() if k.isdigit()) for c in stats["models"].values())
    throttled = sum(m["answered_429"] for m in models.values())
    return {
        "run": label,
        "makespan_s": round(makespan, 1),
        "ideal_s": round(ideal, 1),
        "ratio": round(ideal / makespan, 3),
        "requests": calls,
        "share_429": round(throttled / calls, 4) if calls else 0.0,
        "retries": retries,
        "deferrals": deferrals,
        "models": models,
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    columns = ["makespan_s", "ideal_s", "ratio", "requests", "share_429", "retries", "deferrals"]
    columns += ["submit_s", "to_first_request_s", "to_first_answer_s", "after_last_answer_s"]
    columns += ["judgments", "cpu_ms_per_judgment", "unthrottled_cpu_ms_per_judgment"]
    columns += ["cpu_ratio_to_unthrottled", "redis_commands_per_judgment", "peak_pss_mb_sum"]
    lines = [(column, figure(column)) for column in columns]
    lines += [(f"CPU s {name}", _spent("cpu_s", name)) for name in _names(rows)]
    lines += [(f"peak PSS MB {name}", _spent("peak_pss_mb", name)) for name in _names(rows)]
    lines += [(f"util {model}", _model_figure(model, "utilisation")) for model in MODELS]
    lines += [
        (f"use answering {model}", _model_figure(model, "use_while_answering")) for model in MODELS
    ]
    lines += [
        (f"use 1st {FIRST_SECONDS} s {model}", _model_figure(model, "use_first_seconds"))
        for model in MODELS
    ]
    lines += [(f"leanest 1 s {model}", _model_figure(model, "leanest_second")) for model in MODELS]
    lines += [(f"largest gap {model}", largest_gap_figure(model)) for model in MODELS]
    lines += [("longest worker silence", longest_silence_figure)]
    print_runs(rows, "run", lines, label_width=22)


def _model_figure(model: str, name: str) -> Callable[[dict[str, Any]], object]:
    return lambda row: row["models"][model][name]


def _names(rows: list[dict[str, Any]]) -> list[str]:
    """The processes measured in any run (workers, producer, redis), in a stable order."""
    return sorted({name for row in rows for name in row.get("cpu_s", {})})


def _spent(kind: str, name: str) -> Callable[[dict[str, Any]], object]:
    return lambda row: row.get(kind, {}).get(name, "-")
