"""The sections of the HTML report. Each takes the result records one at a time (`add`) and
renders itself (`html`), so a report over a million records holds a few numbers per
dimension and judge, not the records. A new section is one more class with these two methods.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import combinations
from typing import Protocol

from jury.analysis.agreement import AgreementAccumulator
from jury.results.html.svg_charts import (
    Bar,
    Series,
    colour,
    diverging_bars,
    grouped_bars,
    histogram,
)
from jury.schemas.batch import Dimension
from jury.schemas.identifiers import html_text
from jury.schemas.results import Verdict

MAX_BINS = 10
# Bin widths a reader can follow: a 1–5 scale gets halves, 1–10 whole points, 0–100 tens.
NICE_WIDTHS = tuple(m * 10.0**e for e in range(-3, 7) for m in (1, 2, 2.5, 5))


def bin_width(low: float, high: float) -> float:
    """The narrowest nice width that splits [low, high] into at most MAX_BINS bins."""
    span = high - low
    return next((w for w in NICE_WIDTHS if span / w <= MAX_BINS + 1e-9), span / MAX_BINS)


class Section(Protocol):
    anchor: str
    title: str

    def add(self, verdict: Verdict) -> None: ...

    def html(self) -> str: ...


def fmt_score(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


@dataclass
class Moments:
    """Count, mean and sample standard deviation of a stream of numbers."""

    n: int = 0
    total: float = 0.0
    squares: float = 0.0

    def add(self, value: float) -> None:
        self.n += 1
        self.total += value
        self.squares += value * value

    @property
    def mean(self) -> float | None:
        return self.total / self.n if self.n else None

    @property
    def std(self) -> float | None:
        if self.n < 2:
            return 0.0 if self.n else None
        variance = (self.squares - self.total * self.total / self.n) / (self.n - 1)
        return math.sqrt(max(variance, 0.0))


@dataclass
class DimensionScores:
    low: float
    high: float
    threshold: float
    bins: list[int] = field(default_factory=list)
    scores: Moments = field(default_factory=Moments)
    unscored: int = 0
    passed: int = 0
    consensus: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.width = bin_width(self.low, self.high)
        self.bins = [0] * max(1, math.ceil((self.high - self.low) / self.width - 1e-9))

    def bin_of(self, score: float) -> int:
        """Bins are [low, low + width), …; the top of the scale falls in the last one."""
        return min(len(self.bins) - 1, max(0, int((score - self.low) / self.width + 1e-9)))

    def bin_low(self, index: int) -> float:
        return round(self.low + index * self.width, 9)


class DistributionSection:
    """How the final scores of each dimension are spread over its scale."""

    anchor, title = "distribution", "Score distribution per dimension"

    def __init__(self, dimensions: list[Dimension]) -> None:
        self.dimensions: dict[str, DimensionScores] = {}
        for d in dimensions:
            scale = d.resolved_scale
            self.dimensions[d.name] = DimensionScores(scale.min, scale.max, d.resolved_threshold)

    def add(self, verdict: Verdict) -> None:
        scores = self.dimensions.get(verdict.criterion_id)
        if scores is None:
            return
        metrics = verdict.consensus_metrics
        level = metrics.consensus_level
        scores.consensus[level.value if level else "NONE"] += 1
        if metrics.final_score is None:
            scores.unscored += 1
            return
        scores.scores.add(metrics.final_score)
        scores.bins[scores.bin_of(metrics.final_score)] += 1
        scores.passed += verdict.passed is True

    def html(self) -> str:
        cards = []
        for name, s in self.dimensions.items():
            bars = [
                Bar(
                    f"{s.bin_low(i):g}",
                    count,
                    f"{count} records with a final score in "
                    f"[{s.bin_low(i):g}, {min(s.bin_low(i + 1), s.high):g}"
                    f"{']' if i == len(s.bins) - 1 else ')'}",
                    highlight=s.bin_low(i) >= s.threshold,
                )
                for i, count in enumerate(s.bins)
            ]
            scored = s.scores.n
            rate = f"{s.passed / scored:.0%}" if scored else "—"
            consensus = ", ".join(f"{k} {v}" for k, v in sorted(s.consensus.items())) or "—"
            cards.append(
                f'<div class="card"><h3>{html_text(name)}</h3>'
                + histogram(bars, f"final scores of {name}")
                + f"<p>{scored} scored, {s.unscored} without a score · mean "
                f"{fmt_score(s.scores.mean)} ± {fmt_score(s.scores.std)} · "
                f"threshold {s.threshold:g}, "
                f"passed {rate} · consensus: {html_text(consensus)}</p></div>"
            )
        return (
            '<p class="note">Bars at or above the pass threshold are blue. Hover a bar for '
            "its exact count.</p>" + '<div class="cards">' + "".join(cards) + "</div>"
        )


class JudgeComparisonSection:
    """Each judge's mean score (its samples aggregated within the model) per dimension."""

    anchor, title = "judges", "Per-judge scores"

    def __init__(self, dimensions: list[Dimension], judges: list[str]) -> None:
        self.dimensions = dimensions
        self.judges = judges
        self.scores = {(d.name, j): Moments() for d in dimensions for j in judges}
        self.failed_samples: Counter[tuple[str, str]] = Counter()
        self.unscored: Counter[tuple[str, str]] = Counter()

    def add(self, verdict: Verdict) -> None:
        for judge, evaluation in verdict.llm_evaluations.items():
            key = (verdict.criterion_id, judge)
            if key not in self.scores:
                continue
            self.failed_samples[key] += evaluation.n_failed
            if evaluation.aggregated_score is None:
                self.unscored[key] += 1
            else:
                self.scores[key].add(evaluation.aggregated_score)

    def html(self) -> str:
        names = [d.name for d in self.dimensions]
        series = [
            Series(judge, [self.scores[(d, judge)].mean for d in names]) for judge in self.judges
        ]
        scales = [d.resolved_scale for d in self.dimensions]
        low, high = min(s.min for s in scales), max(s.max for s in scales)
        thresholds = {d.resolved_threshold for d in self.dimensions}
        marker = thresholds.pop() if len(thresholds) == 1 else None
        legend = "".join(
            f'<span class="key"><i style="background:{colour(i)}"></i>{html_text(j)}</span>'
            for i, j in enumerate(self.judges)
        )
        head = "".join(f"<th>{html_text(d)}</th>" for d in names)
        rows = []
        for judge in self.judges:
            cells = []
            for d in names:
                m = self.scores[(d, judge)]
                extra = []
                if self.failed_samples[(d, judge)]:
                    extra.append(f"{self.failed_samples[(d, judge)]} failed samples")
                if self.unscored[(d, judge)]:
                    extra.append(f"no score on {self.unscored[(d, judge)]}")
                note = f'<br><span class="warn">{", ".join(extra)}</span>' if extra else ""
                spread = f"{fmt_score(m.mean)} ± {fmt_score(m.std)}" if m.n else "no score"
                cells.append(f"<td>{spread} <small>(n={m.n})</small>{note}</td>")
            rows.append(f"<tr><th>{html_text(judge)}</th>{''.join(cells)}</tr>")
        return (
            f'<div class="legend">{legend}</div>'
            + grouped_bars(names, series, low, high, "mean score per judge and dimension", marker)
            + '<table class="grid"><thead><tr><th>judge</th>'
            + head
            + "</tr></thead><tbody>"
            + "".join(rows)
            + "</tbody></table>"
            + '<p class="note">mean ± sample standard deviation of the judge\'s aggregated '
            "score over the records it scored; the dashed line is the pass threshold.</p>"
        )


class AgreementSection:
    """How far the judges agree, from figures anyone can recompute by hand:

    - a judge's **offset**: its aggregated score minus the record's final (panel) score,
      averaged over the records it scored. Negative: harsher than the panel; positive: kinder.
    - the **pairwise mean absolute difference** of two judges: |score a − score b| averaged
      over the records both scored. 0 means they always agree.
    """

    anchor, title = "agreement", "Judge agreement"

    def __init__(self, judges: list[str]) -> None:
        self.judges = judges
        self.offsets = {j: Moments() for j in judges}
        self.abs_offsets = {j: Moments() for j in judges}
        self.pairs = {pair: Moments() for pair in combinations(judges, 2)}
        self.statistics = AgreementAccumulator()  # alpha, Spearman, variance share

    def add(self, verdict: Verdict) -> None:
        self.statistics.add(verdict)
        final = verdict.consensus_metrics.final_score
        scores = {
            j: e.aggregated_score
            for j, e in verdict.llm_evaluations.items()
            if e.aggregated_score is not None and j in self.offsets
        }
        if final is not None:
            for judge, score in scores.items():
                self.offsets[judge].add(score - final)
                self.abs_offsets[judge].add(abs(score - final))
        for (a, b), moments in self.pairs.items():
            if a in scores and b in scores:
                moments.add(abs(scores[a] - scores[b]))

    def html(self) -> str:
        rows = [(j, self.offsets[j].mean) for j in self.judges]
        limit = max([abs(v) for _, v in rows if v is not None] + [0.5])
        offset_rows = "".join(
            f"<tr><th>{html_text(j)}</th><td>{fmt_score(self.offsets[j].mean, 3)}</td>"
            f"<td>{fmt_score(self.abs_offsets[j].mean, 3)}</td><td>{self.offsets[j].n}</td></tr>"
            for j in self.judges
        )
        return (
            f'<p class="note">{_definitions()}</p><div class="cards"><div class="card">'
            "<h3>Mean offset from the panel score</h3>"
            + diverging_bars(rows, "mean offset of each judge from the panel", limit)
            + '<table class="grid"><thead><tr><th>judge</th><th>mean offset</th>'
            "<th>mean |offset|</th><th>records</th></tr></thead><tbody>"
            + offset_rows
            + '</tbody></table></div><div class="card wide">'
            "<h3>Pairwise mean absolute difference</h3>"
            + self._matrix()
            + "</div>"
            + '<div class="card wide"><h3>Reliability across judges</h3>'
            + self._statistics()
            + "</div></div>"
        )

    def _statistics(self) -> str:
        """Krippendorff's alpha, Spearman and the within-model variance share per dimension
        (schemas.agreement), the figures `jury results` prints too."""
        report = self.statistics.report()
        scopes = [*report.dimensions.items(), ("all cells", report.overall)]
        rows = []
        notes = []
        for name, agreement in scopes:
            pairs = [p.spearman for p in agreement.spearman if p.spearman is not None]
            spearman = sum(pairs) / len(pairs) if pairs else None
            rows.append(
                f"<tr><th>{html_text(name)}</th><td>{agreement.n_items}</td>"
                f"<td>{fmt_score(agreement.alpha_interval, 3)}</td>"
                f"<td>{fmt_score(agreement.alpha_ordinal, 3)}</td>"
                f"<td>{fmt_score(spearman, 3)}</td>"
                f"<td>{fmt_score(agreement.within_model_variance_share, 3)}</td></tr>"
            )
            if agreement.alpha_note:
                notes.append(f"{html_text(name)}: {html_text(agreement.alpha_note)}")
        note = f'<p class="note">{"<br>".join(notes)}</p>' if notes else ""
        return (
            '<table class="grid"><thead><tr><th>dimension</th><th>items</th>'
            "<th>α interval</th><th>α ordinal</th><th>mean Spearman</th>"
            "<th>within-model variance share</th></tr></thead><tbody>"
            + "".join(rows)
            + "</tbody></table>"
            + note
            + '<p class="note">Krippendorff\'s α: 1 is perfect agreement, 0 what chance gives. '
            "Within-model variance share: the part of a cell's spread that comes from a judge "
            "disagreeing with itself (more samples help) rather than judges disagreeing with "
            "each other.</p>"
        )

    def _matrix(self) -> str:
        if len(self.judges) < 2:
            return "<p>One judge: nothing to compare.</p>"
        head = "".join(f"<th>{html_text(j)}</th>" for j in self.judges)
        rows = []
        for a in self.judges:
            cells = []
            for b in self.judges:
                if a == b:
                    cells.append('<td class="diag">·</td>')
                    continue
                m = self.pairs.get((a, b)) or self.pairs[(b, a)]
                value = m.mean
                # 0 (white) to 2 or more scale points apart (full red).
                heat = 0.0 if value is None else min(value / 2, 1.0)
                cells.append(
                    f'<td style="background:rgba(213,94,0,{heat:.2f})" '
                    f'title="{html_text(a)} vs {html_text(b)}: {m.n} records">'
                    f"{fmt_score(value)}</td>"
                )
            rows.append(f"<tr><th>{html_text(a)}</th>{''.join(cells)}</tr>")
        return f'<table class="grid matrix"><thead><tr><th></th>{head}</tr></thead><tbody>' + (
            "".join(rows) + "</tbody></table>"
        )


def _definitions() -> str:
    return (
        "<b>Offset</b>: a judge's aggregated score minus the record's final (panel) score, "
        "averaged over the records it scored; negative is harsher than the panel, positive "
        "kinder. <b>Pairwise mean absolute difference</b>: |score a − score b| averaged over "
        "the records both judges scored; 0 means they always agree."
    )


def agreement_html(verdicts: Iterable[Verdict], judges: list[str]) -> str:
    """The agreement section's body for these records."""
    section = AgreementSection(judges)
    for verdict in verdicts:
        section.add(verdict)
    return section.html()
