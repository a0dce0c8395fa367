"""The HTML report's record view: each record with every sample behind it (judge, score, the
judge's reasoning, latency, tokens, cost, cached, error), filterable by flag, judge and
dimension; and the alarm the report opens with when judgments failed.

Everything from a batch, an item or a provider is escaped and shown as text; the filters are
a few lines of inline script (the page's CSP allows nothing else).
"""

from __future__ import annotations

from collections.abc import Sequence

from jury.results.html.sections import fmt_score
from jury.schemas.identifiers import html_text
from jury.schemas.outcome import JudgeFailures, failure_paragraph
from jury.schemas.results import Verdict
from jury.schemas.status import BatchState, BatchStatus
from jury.store.inspection import StoredSample

# Records shown with their samples; a larger batch shows its first ones (and says so).
RECORDS_SHOWN = 500

RECORDS_STYLE = """
.alarm{background:#fdecea;border:2px solid #b00;border-radius:6px;padding:10px 16px;margin:14px 0}
.alarm h2{border:none;color:#b00;margin:4px 0}
.alarm p{margin:6px 0;white-space:pre-wrap}
.filters{display:flex;flex-wrap:wrap;gap:12px;margin:8px 0}
.filters select{padding:4px 6px}
details.record{background:#fff;border:1px solid #ddd;border-radius:6px;margin:6px 0;
padding:4px 10px}
details.record[data-flagged="1"]{border-left:4px solid #b00}
details.record summary{cursor:pointer}
td.reasoning{white-space:pre-wrap;max-width:620px}
td.error{color:#b00;white-space:pre-wrap;max-width:420px}
"""

# Shows the records (and, inside them, the samples) that match the three filters.
RECORDS_SCRIPT = """
(function () {
  const flag = document.getElementById('record-flag');
  const judge = document.getElementById('record-judge');
  const dimension = document.getElementById('record-dimension');
  const count = document.getElementById('record-count');
  if (!flag || !judge || !dimension) { return; }
  function apply() {
    let shown = 0;
    for (const record of document.querySelectorAll('#records details.record')) {
      let visible = (flag.value === '' || record.dataset.flagged === flag.value)
        && (dimension.value === '' || record.dataset.dimension === dimension.value);
      let samples = 0;
      for (const row of record.querySelectorAll('tr.sample-row')) {
        row.hidden = judge.value !== '' && row.dataset.judge !== judge.value;
        samples += row.hidden ? 0 : 1;
      }
      if (judge.value !== '' && samples === 0) { visible = false; }
      record.hidden = !visible;
      shown += visible ? 1 : 0;
    }
    count.textContent = String(shown);
  }
  for (const control of [flag, judge, dimension]) { control.addEventListener('change', apply); }
  apply();
})();
"""


def alarm_html(status: BatchStatus, failures: Sequence[JudgeFailures]) -> str:
    """The report's opening alarm: how the batch ended and why, when judgments failed."""
    if not failures and status.status not in (BatchState.FAILED, BatchState.DEGRADED):
        return ""
    headline = {
        BatchState.FAILED: "This batch failed: no verdict has a score.",
        BatchState.DEGRADED: "This batch is degraded: some judgments failed, and its verdicts "
        "rest on the judges that answered.",
    }.get(status.status, f"{status.n_failed_samples:,} judgments failed.")
    paragraphs = "".join(
        f"<p>{html_text(failure_paragraph(f, status.batch_id))}</p>" for f in failures
    )
    return (
        f'<div class="alarm" id="alarm" role="alert"><h2>{html_text(headline)}</h2>'
        f"{paragraphs}</div>"
    )


class RecordsSection:
    """The first RECORDS_SHOWN records; their samples are set after the records streamed past
    (`samples`), read for those items only."""

    anchor, title = "records", "Records and the judges' reasoning"

    def __init__(self, judges: list[str], dimensions: list[str], limit: int = RECORDS_SHOWN):
        self.judges, self.dimensions, self.limit = judges, dimensions, limit
        self.records: list[Verdict] = []
        self.n_records = 0
        self.samples: dict[tuple[str, str], list[StoredSample]] = {}

    def add(self, verdict: Verdict) -> None:
        self.n_records += 1
        if len(self.records) < self.limit:
            self.records.append(verdict)

    def item_ids(self) -> list[str]:
        return list(dict.fromkeys(v.item_id for v in self.records))

    def set_samples(self, samples: list[StoredSample]) -> None:
        for sample in samples:
            self.samples.setdefault((sample.item_id, sample.dimension), []).append(sample)

    def html(self) -> str:
        if not self.records:
            return "<p>No record yet.</p>"
        shown = len(self.records)
        more = (
            f" (the first {shown:,} of {self.n_records:,}; `jury results --samples` has them all)"
            if self.n_records > shown
            else ""
        )
        return (
            f"<p>Each record with every sample behind it{html_text(more)}. Showing "
            f'<b id="record-count">{shown}</b> records.</p>'
            + self._filters()
            + "".join(self._record(v) for v in self.records)
        )

    def _filters(self) -> str:
        def select(ident: str, label: str, options: list[tuple[str, str]]) -> str:
            choices = "".join(
                f'<option value="{html_text(value)}">{html_text(text)}</option>'
                for value, text in options
            )
            return (
                f'<label>{html_text(label)} <select id="{ident}" aria-label="{html_text(label)}">'
                f"{choices}</select></label>"
            )

        return (
            '<div class="filters">'
            + select("record-flag", "flag", [("", "all"), ("1", "flagged"), ("0", "not flagged")])
            + select("record-judge", "judge", [("", "all"), *((j, j) for j in self.judges)])
            + select(
                "record-dimension", "dimension", [("", "all"), *((d, d) for d in self.dimensions)]
            )
            + "</div>"
        )

    def _record(self, verdict: Verdict) -> str:
        m = verdict.consensus_metrics
        flagged = "1" if m.flag_for_review else "0"
        outcome = {True: "pass", False: "fail", None: "—"}[verdict.passed]
        reasons = "; ".join(verdict.flag_reasons)
        summary = (
            f"<b>{html_text(verdict.item_id)}</b> · {html_text(verdict.criterion_id)} · final "
            f"{fmt_score(m.final_score)} · {outcome}"
            + "".join(
                f" · {html_text(method)} {fmt_score(score)}"
                for method, score in (verdict.aggregations or {}).items()
            )
            + vote_summary(verdict)
            + (
                f' · <span class="warn">⚑ {html_text(reasons or "review")}</span>'
                if flagged == "1"
                else ""
            )
        )
        rows = "".join(
            self._sample_row(s)
            for s in self.samples.get((verdict.item_id, verdict.criterion_id), [])
        )
        body = (
            '<table class="grid"><thead><tr><th>judge</th><th>#</th><th>score</th>'
            "<th>reasoning</th><th>latency</th><th>tokens</th><th>cost</th><th>error</th>"
            f"</tr></thead><tbody>{rows}</tbody></table>"
            if rows
            else "<p>No sample stored.</p>"
        )
        return (
            f'<details class="record" data-flagged="{flagged}" '
            f'data-dimension="{html_text(verdict.criterion_id)}"><summary>{summary}</summary>'
            f"{body}</details>"
        )

    @staticmethod
    def _sample_row(sample: StoredSample) -> str:
        r = sample.result
        score = "failed" if r.score is None else f"{r.score:g}"
        if r.ok and r.vote is not None:
            score += " · pass" if r.vote else " · fail"
        cost = "cached" if r.cached else f"${r.cost_usd:.5f}"
        error = f"{r.error_kind or 'error'}: {r.error}" if r.error else ""
        return (
            f'<tr class="sample-row" data-judge="{html_text(r.judge)}">'
            f"<td>{html_text(r.judge)}</td>"
            f"<td>{r.sample}</td><td>{score}</td>"
            f'<td class="reasoning">{html_text(r.reasoning or "")}</td>'
            f"<td>{r.latency_ms:,.0f} ms</td><td>{r.prompt_tokens:,}+{r.completion_tokens:,}</td>"
            f'<td>{cost}</td><td class="error">{html_text(error)}</td></tr>'
        )


def vote_summary(verdict: Verdict) -> str:
    """The judges' pass vote in a record's summary line: share, its verdict, missing votes."""
    vote = verdict.pass_vote
    if vote is None:
        return ""
    if vote.share is None:
        return f" · vote: none of {vote.n_missing} samples voted"
    outcome = "pass" if vote.passed_by_vote else "fail"
    missing = f", {vote.n_missing} missing" if vote.n_missing else ""
    return (
        f" · vote {vote.share:.0%} → {outcome} ({vote.n_pass}/{vote.n_pass + vote.n_fail}{missing})"
    )
