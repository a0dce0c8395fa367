"""Every judgment behind a verdict: per-sample rows for `jury results --samples` (json, jsonl,
csv, streamed) and `jury show BATCH ITEM` (a readable listing with each judge's reasoning)."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from typing import IO, Any

from rich.console import Console
from rich.text import Text

from jury.schemas.batch import Item
from jury.schemas.results import Verdict
from jury.schemas.status import BatchStatus
from jury.store.inspection import StoredSample

SAMPLE_FORMATS = ("json", "jsonl", "csv")
SAMPLE_COLUMNS = [
    "item_id",
    "dimension",
    "judge",
    "sample",
    "score",
    "reasoning",
    "error_kind",
    "error",
    "attempts",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "cached",
    "vote",  # with `pass_vote`: the judge's own pass (true) or fail (false), else empty
]


def sample_record(sample: StoredSample) -> dict[str, Any]:
    """One judgment as a flat record (the columns of SAMPLE_COLUMNS)."""
    result = sample.result.model_dump(mode="json")
    return {
        "item_id": sample.item_id,
        "dimension": sample.dimension,
        **{column: result[column] for column in SAMPLE_COLUMNS[2:]},
    }


def write_samples(
    out: IO[str], fmt: str, status: BatchStatus, samples: Iterable[StoredSample]
) -> int:
    """Stream the samples in `fmt`; returns how many were written."""
    count = 0
    if fmt == "csv":
        writer = csv.DictWriter(out, SAMPLE_COLUMNS)
        writer.writeheader()
        for sample in samples:
            writer.writerow(sample_record(sample))
            count += 1
        return count
    if fmt == "jsonl":
        for sample in samples:
            out.write(json.dumps(sample_record(sample)) + "\n")
            count += 1
        return count
    out.write(f'{{"batch_id": {json.dumps(status.batch_id)}, ')
    out.write(f'"status": {json.dumps(status.status.value)}, "samples": [')
    for sample in samples:
        out.write(("," if count else "") + "\n  " + json.dumps(sample_record(sample)))
        count += 1
    out.write(f'\n], "n_samples": {count}}}\n')
    return count


def _figures(sample: StoredSample) -> str:
    r = sample.result
    parts = [f"{r.latency_ms:,.0f} ms", f"{r.prompt_tokens:,}+{r.completion_tokens:,} tokens"]
    parts.append("cached" if r.cached else f"${r.cost_usd:.5f}")
    if r.attempts > 1:
        parts.append(f"{r.attempts} attempts")
    return " · ".join(parts)


def print_item(
    console: Console,
    item: Item,
    dimensions: list[str],
    verdicts: dict[str, Verdict],
    samples: list[StoredSample],
) -> None:
    """`jury show`: the item's text, then per dimension its verdict and every sample (judge,
    score, reasoning, latency, tokens, cost, cached, error). All of it is printed as text."""
    console.print(Text(f"item {item.id}", style="bold"))
    for label, value in (
        ("input", item.input),
        ("output", item.output),
        ("output A", item.output_a),
        ("output B", item.output_b),
        ("reference", item.reference),
    ):
        if value:
            console.print(Text.assemble((f"  {label}: ", "dim"), value))
    by_dimension: dict[str, list[StoredSample]] = {}
    for sample in samples:
        by_dimension.setdefault(sample.dimension, []).append(sample)
    for dimension in dimensions:
        console.print()
        console.print(_verdict_line(dimension, verdicts.get(dimension)))
        for sample in by_dimension.get(dimension, []):
            r = sample.result
            score = "failed" if r.score is None else f"{r.score:g}"
            if r.ok and r.vote is not None:
                score += " · pass" if r.vote else " · fail"
            console.print(
                Text.assemble(
                    f"  {r.judge} #{r.sample}: ",
                    (score, "bold" if r.score is not None else "bold red"),
                    (f"  ({_figures(sample)})", "dim"),
                )
            )
            if r.reasoning:
                console.print(Text(f"    {r.reasoning}"))
            if r.error:
                console.print(Text(f"    {r.error_kind or 'error'}: {r.error}", style="red"))
        if not by_dimension.get(dimension):
            console.print(Text("  no sample stored yet", style="dim"))


def _verdict_line(dimension: str, verdict: Verdict | None) -> Text:
    if verdict is None:
        return Text.assemble((dimension, "bold"), ": no verdict yet")
    m = verdict.consensus_metrics
    final = "no score" if m.final_score is None else f"{m.final_score:.2f}"
    outcome = {True: "pass", False: "fail", None: "—"}[verdict.passed]
    flag = " · ⚑ review: " + "; ".join(verdict.flag_reasons) if m.flag_for_review else ""
    vote = verdict.pass_vote
    if vote is not None and vote.share is not None:
        outcome += f"; judges' vote {vote.share:.0%}, {'pass' if vote.passed_by_vote else 'fail'}"
    level = m.consensus_level.value if m.consensus_level else "NONE"
    return Text.assemble(
        (dimension, "bold"),
        f": final {final} (threshold {verdict.threshold:g}, {outcome}) · consensus {level} · "
        f"confidence {m.confidence.value}",
        (flag, "bold red"),
    )
