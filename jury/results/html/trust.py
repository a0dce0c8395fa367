"""The report's trust sections: "Does the panel help?" and "Agreement with people".

Both read one trust report (schemas.trust) built from the records as they stream past; the
first section feeds it, the second only renders it. Everything shown is escaped here.
"""

from __future__ import annotations

from jury.analysis.trust import trust_report
from jury.results.html.svg_charts import AXIS, _svg, colour
from jury.results.trust_tables import effective_text, estimate_text
from jury.schemas.identifiers import html_text
from jury.schemas.results import Verdict
from jury.schemas.trust import DimensionTrust, ErrorCorrelation, Estimate, TrustReport
from jury.schemas.trust_records import TrustRecords
from jury.stats.bootstrap import resamples_for

NO_LABELS = (
    "No item of this batch carries people's labels. With them (<code>labels: {dimension: "
    "score}</code> on an item, <code>label: A | B | tie</code> on a pair) this section shows "
    "each judge's and the panel's agreement with people, the effective number of judges and "
    "whether the panel beats its best judge; <code>jury agreement</code> prints the same."
)
METRICS = (
    ("Spearman", "spearman"),
    ("Kendall τb", "kendall"),
    ("κ quadratic", "kappa"),
    ("MAE", "mae"),
    ("pass/fail accuracy", "pass_accuracy"),
)


class TrustData:
    """The records the two sections share, and the report computed once from them."""

    def __init__(self) -> None:
        self.records = TrustRecords()
        self._report: TrustReport | None = None

    def report(self) -> TrustReport:
        if self._report is None:
            largest = max((len(d.labelled) for d in self.records.dimensions.values()), default=0)
            self._report = trust_report(self.records, resamples=resamples_for(largest))
        return self._report


def _matrix(errors: ErrorCorrelation) -> str:
    """A correlation matrix, warm where judges err together, cool where they cancel: against
    labels from 0, against the consensus from −1/(k − 1), what independent judges give."""
    k = len(errors.judges)
    baseline = -1 / (k - 1) if errors.reference == "consensus" and k > 1 else 0.0
    head = "".join(f"<th>{html_text(j)}</th>" for j in errors.judges)
    rows = []
    for a, row in zip(errors.judges, errors.matrix, strict=True):
        cells = []
        for b, value in zip(errors.judges, row, strict=True):
            if a == b:
                cells.append('<td class="diag">·</td>')
                continue
            if value is None:
                cells.append("<td>—</td>")
                continue
            tint = "213,94,0" if value > baseline else "0,114,178"
            strength = min(abs(value - baseline) / (1 - baseline), 1)
            cells.append(
                f'<td style="background:rgba({tint},{strength:.2f})" '
                f'title="{html_text(a)} and {html_text(b)}">{value:+.2f}</td>'
            )
        rows.append(f"<tr><th>{html_text(a)}</th>{''.join(cells)}</tr>")
    return (
        f'<table class="grid matrix"><thead><tr><th></th>{head}</tr></thead><tbody>'
        + "".join(rows)
        + "</tbody></table>"
    )


def _comparison_cells(trust: DimensionTrust) -> str:
    comparison = trust.comparison
    if comparison is None:
        return "<td>—</td>" * 4
    percent = comparison.metric == "accuracy"
    shown = (lambda v: f"{v:.0%}") if percent else (lambda v: f"{v:.2f}")
    return (
        f"<td>{html_text(comparison.best_judge)}</td>"
        f"<td>{'accuracy' if percent else 'MAE'} {shown(comparison.panel)} vs "
        f"{shown(comparison.best)}</td>"
        f"<td>{html_text(estimate_text(comparison.advantage, percent))}</td>"
        f'<td class="finding-{comparison.finding}">{comparison.finding}</td>'
    )


class PanelHelpSection:
    """Does the panel agree with people better than its best judge, and how many
    independent judges is it worth?"""

    anchor, title = "panel-help", "Does the panel help?"

    def __init__(self, data: TrustData) -> None:
        self.data = data

    def add(self, verdict: Verdict) -> None:
        self.data.records.add(verdict)

    def html(self) -> str:
        report = self.data.report()
        lead = (
            f'<p class="headline"><b>{html_text(report.headline)}</b></p>'
            if report.headline
            else '<p class="headline">Without people\'s labels jury cannot say whether the '
            "panel is right, only how much its judges repeat each other.</p>"
        )
        rows = "".join(
            f"<tr><th>{html_text(name)}</th><td>{trust.n_records}</td><td>{trust.n_labelled}</td>"
            f"<td>{effective_text(trust.effective_from_errors)}</td>"
            f"<td>{effective_text(trust.effective_from_scores)}</td>"
            + _comparison_cells(trust)
            + "</tr>"
            for name, trust in report.dimensions.items()
        )
        cards = []
        for name, trust in report.dimensions.items():
            errors = trust.errors_vs_labels or trust.errors_vs_consensus
            if errors is None:
                continue
            against = "people's labels" if errors.reference == "labels" else "the panel consensus"
            cards.append(
                f'<div class="card wide"><h3>{html_text(name)}: errors against {against}</h3>'
                + _matrix(errors)
                + f"<p>{errors.n_items} items with every judge's score.</p></div>"
            )
        return (
            lead + '<table class="grid" id="panel-table"><thead><tr><th>dimension</th>'
            "<th>records</th><th>labelled</th><th>effective judges (errors vs people)</th>"
            "<th>independent opinions (scores)</th><th>best judge</th>"
            "<th>panel vs best</th><th>panel's advantage</th><th>finding</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
            + '<div class="cards">'
            + "".join(cards)
            + "</div>"
            + '<p class="note"><b>Effective judges</b>: Kish\'s k / (1 + (k − 1)·ρ̄), ρ̄ the '
            "mean correlation of the judges' errors against people's labels: how many "
            "independent judges the panel is worth. Judges that make the same mistakes on the "
            "same items count as one. <b>Independent opinions</b>: the same formula on the "
            "correlation of their scores, for batches without labels: it counts shared truth "
            "as well as shared mistakes, so read it as how much the judges repeat each other. "
            "<b>Panel's advantage</b>: how much lower the panel's mean absolute error is than "
            "its best judge's (pairwise: how much higher its accuracy), on the items both "
            "scored, with a 95% bootstrap interval over items; the best judge is picked on the "
            "same items, which flatters it. Without labels, the matrix correlates the judges' "
            "deviations from the panel consensus: independent judges of equal spread sit near "
            "−1/(k − 1); a pair above that errs together.</p>"
        )


def _interval_chart(name: str, trust: DimensionTrust, field: str, low: float, high: float) -> str:
    """Each rater's value of one measure as a dot on its 95% interval."""
    width, row_h, left = 420, 22, 120
    raters = [
        r
        for r in trust.raters
        if getattr(r, field) is not None and getattr(r, field).value is not None
    ]
    if not raters:
        return ""
    # From 0 (or the lowest interval end below it, at most `low`) to the top of the measure.
    ends = [getattr(r, field).low for r in raters] + [getattr(r, field).value for r in raters]
    low = max(low, min([0.0, *(e for e in ends if e is not None)]))
    height = 26 + row_h * len(raters)
    span = (high - low) or 1.0

    def x(value: float) -> float:
        return left + (width - left - 14) * (min(max(value, low), high) - low) / span

    body = [
        f'<line x1="{left}" y1="{height - 18}" x2="{width - 14}" y2="{height - 18}" '
        f'stroke="{AXIS}"/>',
        f'<text x="{left}" y="{height - 4}" fill="{AXIS}">{low:g}</text>',
        f'<text x="{width - 14}" y="{height - 4}" text-anchor="end" fill="{AXIS}">{high:g}</text>',
    ]
    for index, rater in enumerate(raters):
        estimate: Estimate = getattr(rater, field)
        assert estimate.value is not None
        y = 12 + index * row_h
        tip = f"{rater.rater}: {estimate_text(estimate, field.endswith('accuracy'))}"
        shade = "#000" if rater.rater == "panel" else colour(index)
        body.append(
            f'<text x="{left - 6}" y="{y + 4}" text-anchor="end">'
            f"{html_text(rater.rater[-18:])}</text>"
        )
        if estimate.low is not None and estimate.high is not None:
            body.append(
                f'<line x1="{x(estimate.low):.1f}" y1="{y}" x2="{x(estimate.high):.1f}" '
                f'y2="{y}" stroke="{shade}" stroke-width="2"><title>{html_text(tip)}</title></line>'
            )
        body.append(
            f'<circle cx="{x(estimate.value):.1f}" cy="{y}" r="4" fill="{shade}">'
            f"<title>{html_text(tip)}</title></circle>"
        )
    return _svg(width, height, body, f"{field} of each judge and the panel on {name}")


class PeopleSection:
    """Each judge's and the panel's agreement with people's labels, with intervals."""

    anchor, title = "people", "Agreement with people"

    def __init__(self, data: TrustData) -> None:
        self.data = data

    def add(self, verdict: Verdict) -> None:
        """The records reach the shared data through PanelHelpSection."""

    def html(self) -> str:
        report = self.data.report()
        if not report.n_labelled:
            return f'<p class="note">{NO_LABELS}</p>'
        cards = []
        for name, trust in report.dimensions.items():
            if not trust.n_labelled:
                continue
            pairwise = trust.kind == "pairwise"
            metrics = (("accuracy", "accuracy"),) if pairwise else METRICS
            head = "".join(f"<th>{title}</th>" for title, _ in metrics)
            rows = "".join(
                f"<tr><th>{html_text(r.rater)}</th><td>{r.n_items}</td>"
                + "".join(
                    f"<td>{html_text(estimate_text(getattr(r, f), f.endswith('accuracy')))}</td>"
                    for _, f in metrics
                )
                + "</tr>"
                for r in trust.raters
            )
            field, low, high = ("accuracy", 0.0, 1.0) if pairwise else ("kendall", -1.0, 1.0)
            cards.append(
                f'<div class="card wide"><h3>{html_text(name)} ({trust.n_labelled} labelled '
                f"items)</h3>"
                + _interval_chart(name, trust, field, low, high)
                + f'<table class="grid people"><thead><tr><th>rater</th><th>items</th>{head}'
                f"</tr></thead><tbody>{rows}</tbody></table></div>"
            )
        return (
            '<div class="cards">'
            + "".join(cards)
            + "</div>"
            + f'<p class="note">Value [95% interval], from {report.resamples} bootstrap '
            "resamples of the labelled items (seed "
            f"{report.seed}). <b>Spearman</b> and <b>Kendall τb</b>: do the judge and people "
            "rank the items alike; <b>κ quadratic</b>: Cohen's kappa with quadratic weights on "
            "whole points of the scale (1 full agreement, 0 chance); <b>MAE</b>: mean absolute "
            "error in points; <b>pass/fail accuracy</b>: the share of items on the same side "
            "of the threshold as people's label (the panel's by its verdict). Pairwise: "
            "<b>accuracy</b>, the share of pairs where the preferred side matches people's, a "
            "tie counting half. The chart shows Kendall's τb (pairwise: accuracy).</p>"
        )


def trust_sections() -> list[PanelHelpSection | PeopleSection]:
    data = TrustData()
    return [PanelHelpSection(data), PeopleSection(data)]
