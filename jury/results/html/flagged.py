"""The flagged records of the HTML report, the ones to review first on top."""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from jury.results.html.sections import fmt_score
from jury.schemas.batch import Item
from jury.schemas.identifiers import html_text
from jury.schemas.results import JudgeEvaluation, Level, Verdict

FLAGGED_SHOWN = 100
EXCERPT_CHARS = 600


_LEVEL_RANK = {Level.LOW: 0, Level.MEDIUM: 1, Level.PARTIAL: 1, Level.HIGH: 2}


def review_priority(verdict: Verdict) -> tuple[int, float, int]:
    """Smaller first: no score at all, then the judges disagree (wider spread first), then a
    judge failed, then anything else flagged; low confidence before high."""
    m = verdict.consensus_metrics
    if m.final_score is None:
        kind = 0
    elif m.consensus_level == Level.LOW:
        kind = 1
    elif any(e.n_failed or e.aggregated_score is None for e in verdict.llm_evaluations.values()):
        kind = 2
    else:
        kind = 3
    return kind, -(m.cross_model_std or 0.0), _LEVEL_RANK[m.confidence]


class FlaggedSection:
    """The flagged records, the ones to review first on top; at most `limit` are kept."""

    anchor, title = "flagged", "Flagged records to review first"

    def __init__(self, judges: list[str], limit: int = FLAGGED_SHOWN) -> None:
        self.judges = judges
        self.limit = limit
        self.n_flagged = 0
        self._heap: list[tuple[tuple[int, float, int], int, Verdict]] = []
        self.items: Mapping[str, Item] = {}

    def add(self, verdict: Verdict) -> None:
        if not verdict.consensus_metrics.flag_for_review:
            return
        self.n_flagged += 1
        priority = review_priority(verdict)
        # A max-heap of the `limit` best (smallest) priorities: negate to use heapq's min-heap.
        key = (-priority[0], -priority[1], -priority[2])
        entry = (key, -self.n_flagged, verdict)
        if len(self._heap) < self.limit:
            heapq.heappush(self._heap, entry)
        elif entry[:2] > self._heap[0][:2]:
            heapq.heapreplace(self._heap, entry)

    def kept(self) -> list[Verdict]:
        """The records shown, first to review first."""
        ordered = sorted(self._heap, key=lambda e: (e[0], e[1]), reverse=True)
        return [verdict for _, _, verdict in ordered]

    def html(self) -> str:
        kept = self.kept()
        if not kept:
            return "<p>No record is flagged for review.</p>"
        shown = f"the first {len(kept)} of {self.n_flagged}" if self.n_flagged > len(kept) else ""
        rows = "".join(self._row(v) for v in kept)
        return (
            f"<p>{_plural(self.n_flagged, 'record')} flagged"
            f"{'; showing ' + shown if shown else ''}. "
            "No score first, then the widest disagreement, then failed judges.</p>"
            '<input id="flag-filter" type="search" placeholder="filter by item, dimension or '
            'reason" aria-label="filter flagged records">'
            '<table class="grid" id="flagged-table"><thead><tr><th>item</th><th>dimension</th>'
            "<th>final</th><th>spread</th><th>consensus</th><th>scores</th><th>why</th>"
            f"</tr></thead><tbody>{rows}</tbody></table>"
        )

    def _row(self, verdict: Verdict) -> str:
        m = verdict.consensus_metrics
        scores = "<br>".join(
            f"{html_text(j)}: {fmt_score(e.aggregated_score)} <small>[{_samples(e)}]</small>"
            for j, e in verdict.llm_evaluations.items()
        )
        reasons = [*verdict.flag_reasons, *([verdict.error] if verdict.error else [])]
        why = "<br>".join(html_text(r) for r in reasons) or html_text(m.consensus_level or "")
        item = self.items.get(verdict.item_id)
        text = ""
        if item is not None:
            parts = [
                ("input", item.input),
                ("output", item.output),
                ("output A", item.output_a),
                ("output B", item.output_b),
            ]
            text = "".join(
                f"<p><b>{label}</b>: {html_text(_excerpt(value))}</p>"
                for label, value in parts
                if value
            )
            text = f"<details><summary>text</summary>{text}</details>" if text else ""
        level = m.consensus_level.value if m.consensus_level else "NONE"
        return (
            f'<tr class="flag-row"><td>{html_text(verdict.item_id)}{text}</td>'
            f"<td>{html_text(verdict.criterion_id)}</td><td>{fmt_score(m.final_score)}</td>"
            f'<td>{fmt_score(m.cross_model_std)}</td><td class="lvl-{level}">{level}</td>'
            f"<td>{scores}</td><td>{why}</td></tr>"
        )


def _samples(evaluation: JudgeEvaluation) -> str:
    parts = [", ".join(f"{s:g}" for s in evaluation.samples)] if evaluation.samples else []
    if evaluation.n_failed:
        parts.append(f"{evaluation.n_failed} failed")
    return "; ".join(parts)


def _plural(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _excerpt(text: str) -> str:
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "…"
