"""The trust report (schemas.trust) in the terminal: agreement with people, and whether the
panel helps. Shared by `jury agreement` and the summary under `jury results`."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from jury.schemas.calibration import Calibration
from jury.schemas.trust import DimensionTrust, EffectiveJudges, Estimate, TrustReport

SCORE_COLUMNS = (
    ("Spearman", "spearman"),
    ("Kendall τb", "kendall"),
    ("κ quadratic", "kappa"),
    ("MAE", "mae"),
    ("pass/fail acc.", "pass_accuracy"),
)


def _short(judge: str) -> str:
    return judge.rsplit("/", 1)[-1]


def estimate_text(estimate: Estimate | None, percent: bool = False) -> str:
    if estimate is None or estimate.value is None:
        return "—"
    shown = (lambda v: f"{v:.0%}") if percent else (lambda v: f"{v:.2f}")
    if estimate.low is None or estimate.high is None:
        return shown(estimate.value)
    return f"{shown(estimate.value)} [{shown(estimate.low)}, {shown(estimate.high)}]"


def people_table(report: TrustReport) -> Table:
    """Each judge's and the panel's agreement with people's labels, per dimension."""
    pairwise = any(d.kind == "pairwise" for d in report.dimensions.values())
    columns = (("accuracy", "accuracy"),) if pairwise else SCORE_COLUMNS
    table = Table(
        title=f"agreement with people ({report.level:.0%} bootstrap intervals over items)",
        box=box.SIMPLE_HEAD,
        header_style="bold",
    )
    for name in ("dimension", "rater", "items"):
        table.add_column(name, justify="right" if name == "items" else "left")
    for title, _ in columns:
        table.add_column(title, justify="right")
    for dimension, trust in report.dimensions.items():
        for rater in trust.raters:
            cells = [
                estimate_text(getattr(rater, field), percent=field.endswith("accuracy"))
                for _, field in columns
            ]
            style = "bold" if rater.rater == "panel" else ""
            table.add_row(
                dimension, Text(_short(rater.rater), style=style), str(rater.n_items), *cells
            )
    return table


def effective_text(effective: EffectiveJudges | None) -> str:
    if effective is None or effective.value is None:
        return "—"
    return f"{effective.value:.2f} of {effective.n_judges}"


def panel_table(report: TrustReport) -> Table:
    """Per dimension: effective judges, the best judge and the panel's advantage over it."""
    table = Table(title="does the panel help?", box=box.SIMPLE_HEAD, header_style="bold")
    for name in ("dimension", "records", "labelled"):
        table.add_column(name, justify="left" if name == "dimension" else "right")
    table.add_column("effective judges (errors vs people)", justify="right")
    table.add_column("independent opinions (scores)", justify="right")
    table.add_column("best judge", justify="left")
    table.add_column("panel's advantage over it", justify="right")
    for dimension, trust in report.dimensions.items():
        comparison = trust.comparison
        advantage = "—"
        if comparison is not None:
            advantage = estimate_text(comparison.advantage, comparison.metric == "accuracy")
            advantage += " accuracy" if comparison.metric == "accuracy" else " MAE"
        table.add_row(
            dimension,
            str(trust.n_records),
            str(trust.n_labelled),
            effective_text(trust.effective_from_errors),
            effective_text(trust.effective_from_scores),
            _short(comparison.best_judge) if comparison else "—",
            advantage,
        )
    return table


def matrix_table(dimension: str, trust: DimensionTrust) -> Table | None:
    """The correlation of the judges' errors: against people if labelled, else the consensus."""
    errors = trust.errors_vs_labels or trust.errors_vs_consensus
    if errors is None:
        return None
    against = "people's labels" if errors.reference == "labels" else "the panel consensus"
    table = Table(
        title=f"{dimension}: correlation of the judges' errors against {against} "
        f"({errors.n_items} items)",
        box=box.SIMPLE_HEAD,
        header_style="bold",
    )
    table.add_column("")
    for judge in errors.judges:
        table.add_column(_short(judge), justify="right")
    for judge, row in zip(errors.judges, errors.matrix, strict=True):
        table.add_row(_short(judge), *("—" if r is None else f"{r:+.2f}" for r in row))
    return table


def print_trust(console: Console, report: TrustReport, matrices: bool = False) -> None:
    """The agreement with people (when labelled), the panel table and the headline."""
    if report.n_labelled:
        console.print(people_table(report))
    console.print(panel_table(report))
    if matrices:
        for dimension, trust in report.dimensions.items():
            table = matrix_table(dimension, trust)
            if table is not None:
                console.print(table)
    if report.headline:
        console.print(Text(report.headline, style="bold"))
    elif not report.n_labelled:
        console.print(
            "[dim]No item carries people's labels: agreement with people, the effective number "
            "of judges against them and the panel against its best judge need labels "
            "(`labels: {dimension: score}` on items, `label: A|B|tie` on pairs).[/]",
            highlight=False,
        )


def calibration_table(calibration: Calibration) -> Table:
    """Held-out error of each judge's raw and calibrated scores, and the chosen map."""
    table = Table(
        title=f"calibration ({calibration.folds}-fold cross-validated mean absolute error "
        "against people)",
        box=box.SIMPLE_HEAD,
        header_style="bold",
    )
    for name in ("dimension", "judge", "items", "raw", "isotonic", "Platt", "chosen", "weight"):
        table.add_column(
            name, justify="left" if name in ("dimension", "judge", "chosen") else "right"
        )
    for dimension, fitted in calibration.dimensions.items():
        rows = [*fitted.judges.items()] + ([("panel", fitted.panel)] if fitted.panel else [])
        for judge, fit in rows:
            errors = fit.held_out_mae
            table.add_row(
                dimension,
                _short(judge),
                str(fit.n_items),
                *(
                    f"{errors[m]:.3f}" if m in errors else "—"
                    for m in ("identity", "isotonic", "platt")
                ),
                fit.method,
                "" if judge == "panel" else f"{fit.weight:.2f}",
            )
    return table
