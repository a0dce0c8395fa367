"""Writing result records: json, jsonl, csv and the terminal table. Records are streamed, so
a million-record batch is written without holding it in memory."""

from __future__ import annotations

import csv
import json
import os
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO, Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from producer.pairwise_report import PAIRWISE_NOTE, pairwise_table, winner_cell
from producer.planning import BatchPlan
from schemas.agreement import Agreement, AgreementAccumulator, AgreementReport
from schemas.pairwise import PairwiseAccumulator
from schemas.results import Level, Verdict
from schemas.status import BatchStatus

FORMATS = ("table", "json", "jsonl", "csv")
_LEVEL_STYLE = {
    Level.HIGH: "green",
    Level.MEDIUM: "yellow",
    Level.PARTIAL: "yellow",
    Level.LOW: "bold red",
}


@dataclass
class Summary:
    """Counts, means and the judges' agreement over the records, built while they stream past."""

    n_records: int = 0
    n_passed: int = 0
    n_failed: int = 0
    n_flagged: int = 0
    n_errors: int = 0
    consensus: Counter[str] = field(default_factory=Counter)
    _score_totals: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    _score_counts: Counter[str] = field(default_factory=Counter)
    _agreement: AgreementAccumulator = field(default_factory=AgreementAccumulator)
    pairwise: PairwiseAccumulator = field(default_factory=PairwiseAccumulator)

    def add(self, verdict: Verdict) -> Verdict:
        self._agreement.add(verdict)
        if verdict.pairwise is not None:
            self.pairwise.add(verdict.criterion_id, verdict.pairwise)
        self.n_records += 1
        metrics = verdict.consensus_metrics
        self.n_passed += verdict.passed is True
        self.n_failed += verdict.passed is False
        self.n_flagged += metrics.flag_for_review
        self.n_errors += verdict.error is not None
        self.consensus[metrics.consensus_level.value if metrics.consensus_level else "NONE"] += 1
        if metrics.final_score is not None:
            self._score_totals[verdict.criterion_id] += metrics.final_score
            self._score_counts[verdict.criterion_id] += 1
        return verdict

    def agreement(self) -> AgreementReport:
        return self._agreement.report()

    def as_dict(self, status: BatchStatus | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {
            "n_records": self.n_records,
            "n_passed": self.n_passed,
            "n_failed": self.n_failed,
            "n_flagged": self.n_flagged,
            "n_errors": self.n_errors,
            "consensus": dict(self.consensus),
            "mean_final_score": {
                criterion: round(total / self._score_counts[criterion], 4)
                for criterion, total in self._score_totals.items()
            },
            "agreement": self.agreement().model_dump(mode="json"),
        }
        if not self.pairwise.empty:  # pairwise batches: win/loss/tie totals and agreement
            data["pairwise"] = self.pairwise.report().model_dump(mode="json")
        if status is not None:
            data.update(
                n_samples=status.n_samples,
                n_failed_samples=status.n_failed_samples,
                cost_usd=round(status.cost_usd, 6),
            )
            if status.adaptive:
                data["adaptive"] = adaptive_figures(status)
        return data


def adaptive_figures(status: BatchStatus) -> dict[str, Any]:
    """Calls an adaptive batch made against its cap; `saved` once it has finished."""
    saved = status.n_samples_expected - status.n_samples if status.status.finished else None
    return {
        "cap": status.n_samples_expected,
        "calls": status.n_samples,
        "saved": saved,
        "escalated_cells": status.n_escalated,
        "cells": status.n_cells,
    }


def make_console(stderr: bool = False) -> Console:
    """A console that is wide enough for the verdict table even when output is piped."""
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else int(os.environ.get("COLUMNS") or 160)
    return Console(stderr=stderr, width=width)


def record_json(verdict: Verdict) -> dict[str, Any]:
    return verdict.model_dump(mode="json")


def write_json(out: IO[str], status: BatchStatus, verdicts: Iterable[Verdict]) -> Summary:
    summary = Summary()
    out.write(f'{{"batch_id": {json.dumps(status.batch_id)}, ')
    out.write(f'"status": {json.dumps(status.status.value)}, "results": [')
    for index, verdict in enumerate(verdicts):
        out.write(("," if index else "") + "\n  " + json.dumps(record_json(summary.add(verdict))))
    out.write(f'\n], "summary": {json.dumps(summary.as_dict(status))}}}\n')
    return summary


def write_jsonl(out: IO[str], verdicts: Iterable[Verdict]) -> Summary:
    summary = Summary()
    for verdict in verdicts:
        out.write(json.dumps(record_json(summary.add(verdict))) + "\n")
    return summary


CSV_COLUMNS = [
    "item_id",
    "criterion_id",
    "final_score",
    "cross_model_std",
    "consensus_level",
    "confidence",
    "flag_for_review",
    "passed",
    "threshold",
    "error",
]


PAIRWISE_CSV_COLUMNS = [
    "winner",
    "score_a",
    "score_b",
    "agreement_pct",
    "position_consistency_pct",
    "first_position_bias",
]


def write_csv(
    out: IO[str], verdicts: Iterable[Verdict], judges: list[str], pairwise: bool = False
) -> Summary:
    """One row per record; each judge adds its aggregated score, std and failed count; a
    pairwise batch adds its winner and agreement columns at the end."""
    summary = Summary()
    writer = csv.writer(out)
    judge_columns = [f"{j}:{part}" for j in judges for part in ("score", "std", "n_failed")]
    writer.writerow(CSV_COLUMNS + judge_columns + (PAIRWISE_CSV_COLUMNS if pairwise else []))
    for verdict in verdicts:
        summary.add(verdict)
        m = verdict.consensus_metrics
        row: list[Any] = [
            verdict.item_id,
            verdict.criterion_id,
            m.final_score,
            m.cross_model_std,
            m.consensus_level.value if m.consensus_level else "",
            m.confidence.value,
            m.flag_for_review,
            verdict.passed,
            verdict.threshold,
            verdict.error or "",
        ]
        for judge in judges:
            e = verdict.llm_evaluations.get(judge)
            row += [e.aggregated_score, e.within_model_std, e.n_failed] if e else ["", "", ""]
        if pairwise:
            outcome = verdict.pairwise.model_dump() if verdict.pairwise else {}
            row += [outcome.get(column, "") for column in PAIRWISE_CSV_COLUMNS]
        writer.writerow(row)
    return summary


def _score(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def verdict_table(
    verdicts: Iterable[Verdict], judges: list[str], title: str
) -> tuple[Table, Summary]:
    summary = Summary()
    table = Table(title=title, box=box.SIMPLE_HEAD, header_style="bold")
    table.add_column("item", no_wrap=True)
    table.add_column("criterion", no_wrap=True)
    for judge in judges:
        table.add_column(judge.rsplit("/", 1)[-1], justify="right")
    for name in ("final", "std", "consensus", "confidence", "pass", "flag"):
        table.add_column(name, justify="right" if name in ("final", "std") else "left")
    for verdict in verdicts:
        summary.add(verdict)
        m = verdict.consensus_metrics
        cells: list[Text | str] = [verdict.item_id, verdict.criterion_id]
        for judge in judges:
            e = verdict.llm_evaluations.get(judge)
            if e is None or e.aggregated_score is None:
                cells.append(Text("failed", style="red"))
            else:
                cells.append(f"{e.aggregated_score:.2f}±{e.within_model_std or 0:.1f}")
        level = m.consensus_level
        cells += [
            Text(_score(m.final_score), style="bold"),
            _score(m.cross_model_std),
            Text(
                level.value if level else "NONE",
                style=_LEVEL_STYLE.get(level, "red") if level else "red",
            ),
            Text(m.confidence.value, style=_LEVEL_STYLE[m.confidence]),
            winner_cell(verdict)
            or {
                True: Text("pass", style="green"),
                False: Text("fail", style="red"),
                None: Text("—"),
            }[verdict.passed],
            Text("⚑ review", style="bold red") if m.flag_for_review else "",
        ]
        table.add_row(*cells)
    return table, summary


def print_summary(console: Console, status: BatchStatus, summary: Summary) -> None:
    if summary.n_records:
        print_agreement(console, summary.agreement())
    if not summary.pairwise.empty:
        console.print(pairwise_table(summary.pairwise.report()))
        console.print(f"[dim]{PAIRWISE_NOTE}[/]", highlight=False)
    consensus = ", ".join(f"{k} {v}" for k, v in sorted(summary.consensus.items()))
    console.print(
        f"[bold]{status.name}[/] ({status.batch_id}): {status.status.value}; "
        f"{summary.n_records} verdicts, {summary.n_passed} passed, {summary.n_failed} failed, "
        f"[red]{summary.n_flagged} flagged for review[/]; consensus: {consensus or '—'}; "
        f"{status.n_samples} samples ({status.n_failed_samples} failed), "
        f"cost ${status.cost_usd:.4f}"
    )
    if status.adaptive:
        figures = adaptive_figures(status)
        saved = "" if figures["saved"] is None else f", {figures['saved']:,} calls saved"
        console.print(
            f"adaptive: {figures['calls']:,} of at most {figures['cap']:,} calls{saved}; "
            f"{figures['escalated_cells']:,} of {figures['cells']:,} cells escalated",
            highlight=False,
        )


def _short(judge: str) -> str:
    return judge.rsplit("/", 1)[-1]


def _spearman_text(agreement: Agreement) -> str:
    pairs = [p for p in agreement.spearman if p.spearman is not None]
    if not pairs:
        return "—"
    if len(pairs) == 1:
        return f"{pairs[0].spearman:.2f}"
    mean = sum(p.spearman or 0 for p in pairs) / len(pairs)
    low = min(pairs, key=lambda p: p.spearman or 0)
    return f"{mean:.2f}, min {low.spearman:.2f} ({_short(low.judge_a)}~{_short(low.judge_b)})"


def agreement_table(report: AgreementReport) -> tuple[Table, list[str]]:
    """The agreement statistics, one row per dimension and one for all cells, and the notes
    that say why a statistic is undefined."""
    table = Table(title="agreement between judges", box=box.SIMPLE_HEAD, header_style="bold")
    for column in ("criterion", "items", "α interval", "α ordinal", "Spearman (mean)", "bias"):
        table.add_column(column, justify="right" if column.startswith(("items", "α")) else "left")
    table.add_column("within-model share", justify="right")
    notes: list[str] = []
    rows = [*report.dimensions.items(), ("all cells", report.overall)]
    for name, agreement in rows:
        if agreement.alpha_note:
            notes.append(f"{name}: α undefined, {agreement.alpha_note}")
        share = agreement.within_model_variance_share
        table.add_row(
            Text(name, style="bold" if name == "all cells" else ""),
            str(agreement.n_items),
            _score(agreement.alpha_interval),
            _score(agreement.alpha_ordinal),
            _spearman_text(agreement),
            ", ".join(
                f"{_short(b.judge)} {b.mean_offset:+.2f}"
                for b in agreement.bias
                if b.mean_offset is not None
            )
            or "—",
            "—" if share is None else f"{share:.0%}",
        )
    return table, notes


def print_agreement(console: Console, report: AgreementReport) -> None:
    table, notes = agreement_table(report)
    console.print(table)
    for note in notes:
        console.print(f"[dim]{note}[/]", highlight=False)


def print_plan(console: Console, name: str, plan: BatchPlan) -> None:
    table = Table(title=f"{name}: plan (dry run, nothing enqueued)", header_style="bold")
    for column in ("judge", "model", "calls", "prompt tokens", "completion tokens", "cost USD"):
        table.add_column(column, justify="left" if column in ("judge", "model") else "right")
    for j in plan.judges:
        cost = "unknown price" if j.cost_usd is None else f"{j.cost_usd:.4f}"
        table.add_row(
            j.judge,
            j.model,
            f"{j.calls:,}",
            f"~{j.prompt_tokens:,}",
            f"~{j.completion_tokens:,}",
            cost,
        )
    console.print(table)
    total = (
        "unknown (a model is missing from the price map)"
        if plan.cost_usd is None
        else (f"~${plan.cost_usd:.4f}")
    )
    console.print(
        f"{plan.n_items:,} items × {plan.n_dimensions} dimensions = {plan.n_cells:,} verdicts; "
        f"{plan.calls:,} judge calls; estimated cost {total}",
        highlight=False,
    )
    if plan.first_round_calls is not None:
        console.print(
            f"adaptive: {plan.first_round_calls:,} calls in the first round; the calls and cost "
            "above are the cap, spent only on cells the first round leaves uncertain",
            highlight=False,
        )
