"""Writing result records: json, jsonl and the terminal table (csv: csv_records). Records are
streamed, so a million-record batch is written without holding it in memory."""

from __future__ import annotations

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

from jury.analysis.agreement import Agreement, AgreementAccumulator, AgreementReport
from jury.analysis.comparison import DimensionCorrelations
from jury.analysis.trust import trust_report
from jury.results.pairwise import (
    PAIRWISE_NOTE,
    pairwise_table,
    standings_table,
    winner_cell,
)
from jury.results.pairwise_totals import PairwiseAccumulator
from jury.results.terminal import safe_text
from jury.results.trust_tables import print_trust
from jury.schemas.output_sets import OutputRankings
from jury.schemas.results import Level, Verdict
from jury.schemas.status import BatchStatus
from jury.schemas.trust import TrustReport
from jury.schemas.trust_records import TrustRecords
from jury.stats.bootstrap import resamples_for

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
    outputs: OutputRankings = field(default_factory=OutputRankings)
    trust: TrustRecords = field(default_factory=TrustRecords)
    dimensions: DimensionCorrelations = field(default_factory=DimensionCorrelations)

    def add(self, verdict: Verdict) -> Verdict:
        self._agreement.add(verdict)
        self.dimensions.add(verdict)
        self.trust.add(verdict)
        if verdict.pairwise is not None:
            self.pairwise.add(verdict.criterion_id, verdict.pairwise)
            self.outputs.add(verdict.item_id, verdict.pairwise)
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

    def trust_report(self) -> TrustReport:
        """Agreement with people and whether the panel helps (schemas.trust)."""
        largest = max((len(d.labelled) for d in self.trust.dimensions.values()), default=0)
        return trust_report(self.trust, resamples=resamples_for(largest))

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
            "dimension_correlation": [c.model_dump() for c in self.dimensions.report()],
            "trust": self.trust_report().model_dump(mode="json"),
        }
        if not self.pairwise.empty:  # pairwise batches: win/loss/tie totals and agreement
            data["pairwise"] = self.pairwise.report().model_dump(mode="json")
        if not self.outputs.empty:  # items with `outputs`: each output's standing
            data["outputs"] = self.outputs.report()
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


def _score(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


# Compact layout: a judge's column holds "4.33" under its name cut to this many characters.
_COMPACT_JUDGE_WIDTH = 6


def _short(judge: str) -> str:
    return judge.rsplit("/", 1)[-1]


def verdict_table(
    verdicts: Iterable[Verdict],
    judges: list[str],
    title: Text | str,
    console: Console | None = None,
) -> tuple[Table, Summary]:
    """The verdicts, one row per record. Where the full layout is wider than the `console`,
    the table turns compact: each judge's score without its spread under a shortened name,
    no std and confidence columns, the flag as ⚑. Scores are never cut; long ids wrap
    instead."""
    rows = list(verdicts)  # the table holds every row anyway; it may be laid out twice
    # A batch with `report_uncertainty: false`: no std, consensus or confidence columns.
    uncertainty = all(v.uncertainty_shown for v in rows)
    table, summary = _verdict_table(rows, judges, title, full=True, uncertainty=uncertainty)
    wide = console.options.update_width(100_000) if console is not None else None
    if console is not None and console.measure(table, options=wide).maximum > console.width:
        table, summary = _verdict_table(rows, judges, title, full=False, uncertainty=uncertainty)
    return table, summary


def _verdict_table(
    verdicts: list[Verdict],
    judges: list[str],
    title: Text | str,
    full: bool,
    uncertainty: bool = True,
) -> tuple[Table, Summary]:
    summary = Summary()
    table = Table(
        title=title,
        box=box.SIMPLE_HEAD,
        header_style="bold",
        collapse_padding=True,
        pad_edge=False,
    )
    table.add_column("item", overflow="fold", min_width=8)
    table.add_column("criterion", overflow="fold", min_width=8)
    for judge in judges:
        table.add_column(
            safe_text(_short(judge)),
            justify="right",
            no_wrap=True,
            overflow="ellipsis",
            min_width=8 if full else 4,
            max_width=None if full else _COMPACT_JUDGE_WIDTH,
        )
    names: tuple[str, ...] = ("final", "std", "consensus", "confidence", "pass", "flag")
    if not uncertainty:
        names = ("final", "pass", "flag")
    for name in (
        names if full else [n for n in names if n in ("final", "consensus", "pass", "flag")]
    ):
        table.add_column(
            name,
            justify="right" if name in ("final", "std") else "left",
            no_wrap=True,
            min_width=4 if name in ("final", "std", "pass") else None,
        )
    for verdict in verdicts:
        summary.add(verdict)
        m = verdict.consensus_metrics
        cells: list[Text | str] = [safe_text(verdict.item_id), safe_text(verdict.criterion_id)]
        for judge in judges:
            e = verdict.llm_evaluations.get(judge)
            if e is None or e.aggregated_score is None:
                cells.append(Text("failed", style="red"))
            elif full and uncertainty:
                cells.append(f"{e.aggregated_score:.2f}±{e.within_model_std or 0:.1f}")
            else:
                cells.append(f"{e.aggregated_score:.2f}")
        level = m.consensus_level
        consensus = Text(
            level.value if level else "NONE",
            style=_LEVEL_STYLE.get(level, "red") if level else "red",
        )
        outcome = (
            winner_cell(verdict)
            or {
                True: Text("pass", style="green"),
                False: Text("fail", style="red"),
                None: Text("—"),
            }[verdict.passed]
        )
        vote = verdict.pass_vote
        if vote is not None and vote.share is not None:
            # The judges' own vote beside the threshold's verdict: "pass · vote 67%".
            outcome = outcome + Text(f" · vote {vote.share:.0%}", style="dim")
        flag = Text("⚑ review" if full else "⚑", style="bold red") if m.flag_for_review else ""
        final = Text(_score(m.final_score), style="bold")
        if not uncertainty:
            cells += [final, outcome, flag]
        elif full:
            confidence = Text(m.confidence.value, style=_LEVEL_STYLE[m.confidence])
            cells += [final, _score(m.cross_model_std), consensus, confidence, outcome, flag]
        else:
            cells += [final, consensus, outcome, flag]
        table.add_row(*cells)
    return table, summary


def cached_note(cached: int) -> str:
    """`, 12 from the cache` when judgments were answered from the result cache (so a re-run
    costing $0 says why), else nothing."""
    return f", {cached:,} from the cache" if cached else ""


def print_summary(console: Console, status: BatchStatus, summary: Summary, cached: int = 0) -> None:
    """What follows the verdict table: the agreement (and trust, pairwise, standings) tables
    and the end-of-batch line; `cached` judgments were answered from the result cache."""
    if summary.n_records:
        print_agreement(console, summary.agreement())
    if summary.trust.n_labelled:  # unlabelled batches: `jury agreement` shows the rest
        print_trust(console, summary.trust_report())
    if not summary.pairwise.empty:
        console.print(pairwise_table(summary.pairwise.report()))
        console.print(f"[dim]{PAIRWISE_NOTE}[/]", highlight=False)
    if not summary.outputs.empty:
        console.print(standings_table(summary.outputs))
    consensus = ", ".join(f"{k} {v}" for k, v in sorted(summary.consensus.items()))
    console.print(
        Text.assemble(
            safe_text(status.name, "bold"),
            safe_text(f" ({status.batch_id}): {status.status.value}; "),
            f"{summary.n_records} verdicts, {summary.n_passed} passed, {summary.n_failed} failed, ",
            (f"{summary.n_flagged} flagged for review", "red"),
            f"; consensus: {consensus or '—'}; {status.n_samples} samples "
            f"({status.n_failed_samples} failed{cached_note(cached)}), "
            f"cost ${status.cost_usd:.4f}",
        )
    )
    if status.adaptive:
        figures = adaptive_figures(status)
        saved = "" if figures["saved"] is None else f", {figures['saved']:,} calls saved"
        console.print(
            f"adaptive: {figures['calls']:,} of at most {figures['cap']:,} calls{saved}; "
            f"{figures['escalated_cells']:,} of {figures['cells']:,} cells escalated",
            highlight=False,
        )


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
            safe_text(name, "bold" if name == "all cells" else ""),
            str(agreement.n_items),
            _score(agreement.alpha_interval),
            _score(agreement.alpha_ordinal),
            safe_text(_spearman_text(agreement)),
            safe_text(
                ", ".join(
                    f"{_short(b.judge)} {b.mean_offset:+.2f}"
                    for b in agreement.bias
                    if b.mean_offset is not None
                )
                or "—"
            ),
            "—" if share is None else f"{share:.0%}",
        )
    return table, notes


def print_agreement(console: Console, report: AgreementReport) -> None:
    table, notes = agreement_table(report)
    console.print(table)
    for note in notes:
        console.print(safe_text(note, "dim"), highlight=False)
