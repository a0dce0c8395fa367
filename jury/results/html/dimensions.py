"""The HTML report's section on how correlated a batch's dimensions are: Pearson's r between
the final scores of each pair of dimensions (schemas.comparison), the orthogonality
experiment's heuristic for judging dimensions apart."""

from __future__ import annotations

from jury.analysis.comparison import DimensionCorrelations
from jury.schemas.identifiers import html_text
from jury.schemas.results import Verdict

NOTE = (
    "Pearson's r between the final scores of two dimensions, over the items scored on both. "
    "Near 0, the dimensions are orthogonal: judging each in its own call (the default, "
    "per dimension) loses nothing; near 1, they measure much the same thing."
)


class DimensionCorrelationSection:
    anchor, title = "dimension-correlation", "Correlation between dimensions"

    def __init__(self) -> None:
        self.correlations = DimensionCorrelations()

    def add(self, verdict: Verdict) -> None:
        self.correlations.add(verdict)

    def html(self) -> str:
        rows = "".join(
            f"<tr><td>{html_text(c.dimension_a)}</td><td>{html_text(c.dimension_b)}</td>"
            f"<td>{'—' if c.pearson is None else f'{c.pearson:+.2f}'}</td>"
            f"<td>{c.n_items}</td></tr>"
            for c in self.correlations.report()
        )
        if not rows:
            return "<p>No two dimensions scored on the same items yet.</p>"
        return (
            f'<p class="note">{html_text(NOTE)}</p><table class="grid"><thead><tr>'
            "<th>dimension</th><th>dimension</th><th>Pearson r</th><th>items</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
        )
