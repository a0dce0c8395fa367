"""How pairwise results are shown: the totals table under `jury results`, the winner column of
the verdict table, and the HTML report's sections for a pairwise batch (in place of the score
distribution and per-judge score sections, which read scores on the dimension's scale)."""

from __future__ import annotations

from collections import Counter

from rich import box
from rich.table import Table
from rich.text import Text

from jury.results.html.sections import Moments, fmt_score
from jury.results.html.svg_charts import Bar, histogram
from jury.results.pairwise_totals import PairwiseAccumulator
from jury.results.terminal import safe_text
from jury.schemas.batch import Dimension
from jury.schemas.identifiers import html_text
from jury.schemas.output_sets import OutputRankings, OutputStanding, ranked
from jury.schemas.pairwise import PairwiseSummary, PairwiseTotals, Winner, winner_of
from jury.schemas.results import Verdict

_WINNER_TEXT: dict[Winner, Text] = {
    "A": Text("A wins", style="green"),
    "B": Text("B wins", style="magenta"),
    "tie": Text("tie", style="yellow"),
}


def winner_cell(verdict: Verdict) -> Text | None:
    """The verdict table's pass column for a pairwise record (None for any other record)."""
    if verdict.pairwise is None:
        return None
    winner = verdict.pairwise.winner
    if winner and winner != "tie" and verdict.pairwise.winner_name:
        return Text(f"{verdict.pairwise.winner_name} wins", style=_WINNER_TEXT[winner].style)
    return _WINNER_TEXT[winner] if winner else Text("—")


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}%"


def _signed(value: float | None) -> str:
    return "—" if value is None else f"{value:+.2f}"


def _row(name: str, totals: PairwiseTotals) -> list[str | Text]:
    return [
        safe_text(name, "bold" if name == "all dimensions" else ""),
        str(totals.n_records),
        str(totals.wins_a),
        str(totals.wins_b),
        str(totals.ties),
        "—" if totals.win_rate_a is None else f"{totals.win_rate_a:.0%}",
        _pct(totals.agreement_pct),
        _pct(totals.position_consistency_pct),
        _signed(totals.first_position_bias),
    ]


def pairwise_table(summary: PairwiseSummary) -> Table:
    """Win/loss/tie totals (A's side) per dimension and overall, with their agreement."""
    table = Table(title="pairwise: output A against output B", box=box.SIMPLE_HEAD)
    columns = ("dimension", "records", "A wins", "B wins", "ties", "A win rate")
    for column in (*columns, "agreement", "order-consistent", "first-position bias"):
        table.add_column(column, justify="left" if column == "dimension" else "right")
    for name, totals in summary.dimensions.items():
        table.add_row(*_row(name, totals))
    if len(summary.dimensions) > 1:
        table.add_row(*_row("all dimensions", summary.overall))
    return table


def standings_table(rankings: OutputRankings) -> Table:
    """Each output's wins, losses and ties against the others over the batch (items with
    `outputs`), best first."""
    table = Table(title="outputs: each against the others", box=box.SIMPLE_HEAD)
    for column in ("rank", "output", "wins", "losses", "ties", "win rate", "mean preference"):
        table.add_column(column, justify="left" if column == "output" else "right")
    for s in ranked(rankings.overall):
        table.add_row(
            str(s.rank),
            safe_text(s.output),
            str(s.wins),
            str(s.losses),
            str(s.ties),
            "—" if s.win_rate is None else f"{s.win_rate:.0%}",
            _signed(s.mean_preference),
        )
    return table


PAIRWISE_NOTE = (
    "A win rate counts a tie as half a win. Agreement: the share of judgments (every judge's "
    "every sample, both orders averaged) whose own winner is the record's winner. "
    "Order-consistent: judgments whose two orders (A first, B first) name the same winner. "
    "First-position bias: the points an output gains by being shown first, on average; "
    "judging both orders cancels it from the preference."
)


class PairwiseSection:
    """Winners per dimension and the distribution of the panel's preference for A."""

    anchor, title = "distribution", "Pairwise comparison: who wins, per dimension"

    def __init__(self, dimensions: list[Dimension]) -> None:
        self.dimensions = dimensions
        self.totals = PairwiseAccumulator()
        self.preferences = {d.name: Moments() for d in dimensions}
        self.outputs = OutputRankings()

    def add(self, verdict: Verdict) -> None:
        if verdict.pairwise is None:
            return
        self.totals.add(verdict.criterion_id, verdict.pairwise)
        self.outputs.add(verdict.item_id, verdict.pairwise)
        if verdict.pairwise.preference is not None and verdict.criterion_id in self.preferences:
            self.preferences[verdict.criterion_id].add(verdict.pairwise.preference)

    def html(self) -> str:
        report = self.totals.report()
        cards = []
        for dimension in self.dimensions:
            totals = report.dimensions.get(dimension.name)
            if totals is None:
                continue
            counts = [("B wins", totals.wins_b), ("tie", totals.ties), ("A wins", totals.wins_a)]
            bars = [
                Bar(label, count, f"{count} records: {label}", highlight=label == "A wins")
                for label, count in counts
            ]
            preference = self.preferences[dimension.name]
            cards.append(
                f'<div class="card"><h3>{html_text(dimension.name)}</h3>'
                + histogram(bars, f"winners on {dimension.name}", width=260)
                + f"<p>{totals.n_records} records · A win rate "
                f"{'—' if totals.win_rate_a is None else f'{totals.win_rate_a:.0%}'} · mean "
                f"preference for A {_signed(preference.mean)} ± {fmt_score(preference.std)} · "
                f"agreement {_pct(totals.agreement_pct)} · order-consistent "
                f"{_pct(totals.position_consistency_pct)} · first-position bias "
                f"{_signed(totals.first_position_bias)}</p></div>"
            )
        overall = report.overall
        return (
            f'<p class="note">{html_text(PAIRWISE_NOTE)}</p><div class="stats">'
            f'<div class="stat"><b>{overall.wins_a}</b>A wins</div>'
            f'<div class="stat"><b>{overall.wins_b}</b>B wins</div>'
            f'<div class="stat"><b>{overall.ties}</b>ties</div>'
            f'<div class="stat"><b>{_pct(overall.agreement_pct)}</b>agreement</div></div>'
            '<div class="cards">' + "".join(cards) + "</div>" + standings_html(self.outputs)
        )


def _standings_rows(rows: list[OutputStanding]) -> str:
    return "".join(
        f"<tr><td>{s.rank}</td><th>{html_text(s.output)}</th><td>{s.wins}</td>"
        f"<td>{s.losses}</td><td>{s.ties}</td>"
        f"<td>{'—' if s.win_rate is None else f'{s.win_rate:.0%}'}</td>"
        f"<td>{_signed(s.mean_preference)}</td></tr>"
        for s in rows
    )


def standings_html(rankings: OutputRankings, max_items: int = 200) -> str:
    """Items with `outputs`: each output's standing over the batch, then per item (the first
    `max_items`; `jury results --format json` has them all)."""
    if rankings.empty:
        return ""
    head = (
        '<table class="grid"><thead><tr><th>rank</th><th>output</th><th>wins</th>'
        "<th>losses</th><th>ties</th><th>win rate</th><th>mean preference</th></tr></thead>"
    )
    per_item = []
    for n, (item, rows) in enumerate(rankings.per_item()):
        if n == max_items:
            break
        per_item.append(
            f"<h3>{html_text(item)}</h3>{head}<tbody>{_standings_rows(rows)}</tbody></table>"
        )
    return (
        f"<h3>Outputs, each against the others</h3>{head}<tbody>"
        + _standings_rows(ranked(rankings.overall))
        + "</tbody></table>"
        + "".join(per_item)
    )


class PairwiseJudgesSection:
    """Each judge's mean preference for A, and how often its own winner is the panel's."""

    anchor, title = "judges", "Per-judge preferences"

    def __init__(self, dimensions: list[Dimension], judges: list[str]) -> None:
        self.dimensions = [d.name for d in dimensions]
        self.judges = judges
        self.preferences = {(d, j): Moments() for d in self.dimensions for j in judges}
        self.with_panel: Counter[tuple[str, str]] = Counter()

    def add(self, verdict: Verdict) -> None:
        outcome = verdict.pairwise
        if outcome is None:
            return
        for judge, evaluation in verdict.llm_evaluations.items():
            key = (verdict.criterion_id, judge)
            if key not in self.preferences or evaluation.aggregated_score is None:
                continue
            self.preferences[key].add(evaluation.aggregated_score)
            own = winner_of(evaluation.aggregated_score, outcome.tie_tolerance)
            self.with_panel[key] += own == outcome.winner

    def html(self) -> str:
        head = "".join(f"<th>{html_text(d)}</th>" for d in self.dimensions)
        rows = []
        for judge in self.judges:
            cells = []
            for d in self.dimensions:
                m = self.preferences[(d, judge)]
                agree = f"{self.with_panel[(d, judge)] / m.n:.0%}" if m.n else "—"
                cells.append(
                    f"<td>{_signed(m.mean)} ± {fmt_score(m.std)} <small>(n={m.n}, winner as "
                    f"the panel's: {agree})</small></td>"
                )
            rows.append(f"<tr><th>{html_text(judge)}</th>{''.join(cells)}</tr>")
        return (
            '<table class="grid"><thead><tr><th>judge</th>'
            + head
            + "</tr></thead><tbody>"
            + "".join(rows)
            + '</tbody></table><p class="note">The judge\'s preference for A (score of A minus '
            "score of B, both orders averaged, over its samples), mean ± standard deviation "
            "over the records, and how often the winner it alone would name is the panel's.</p>"
        )
