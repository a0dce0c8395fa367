"""`jury report ID --output report.html`: one self-contained HTML page about a batch.

Everything is inline (CSS, a few lines of script, SVG charts) and a Content-Security-Policy
forbids the page any fetch at all, so it opens offline, can be mailed or archived as one file,
and item text — untrusted, escaped everywhere — cannot make it load anything. The records are
streamed once through the sections (producer.report_sections).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from jury.errors import JuryError, UnknownBatchError
from jury.results.html.dimensions import DimensionCorrelationSection
from jury.results.html.flagged import FlaggedSection
from jury.results.html.records import (
    RECORDS_SCRIPT,
    RECORDS_STYLE,
    RecordsSection,
    alarm_html,
)
from jury.results.html.sections import (
    AgreementSection,
    DistributionSection,
    JudgeComparisonSection,
    Section,
)
from jury.results.html.trust import trust_sections
from jury.results.labelled import read_records
from jury.results.pairwise import PairwiseJudgesSection, PairwiseSection
from jury.results.provider_batches import provider_batches_html
from jury.schemas.batch import BatchConfig, Item
from jury.schemas.identifiers import html_text
from jury.schemas.status import BatchStatus
from jury.store.inspection import in_panel_order, samples_of_items
from jury.store.outcome import judge_failures
from jury.store.repository import batch_status, load_config, load_item
from jury.store.sql import Sessions

# No network, no plugins, no frames: only the inline style and script of this page.
CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "img-src data:; base-uri 'none'; form-action 'none'"
)

STYLE = (
    """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1d2b3a;color:#fff;padding:18px 28px}
header h1{margin:0 0 4px;font-size:22px}
header .sub{opacity:.8}
nav{padding:8px 28px;background:#eef1f4;position:sticky;top:0}
nav a{margin-right:16px;color:#1d4f91;text-decoration:none}
main{padding:8px 28px 40px}
section{margin-top:26px}
h2{border-bottom:2px solid #1d2b3a;padding-bottom:4px}
.stats{display:flex;flex-wrap:wrap;gap:10px;margin:14px 0}
.stat{background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:110px}
.stat b{display:block;font-size:20px}
.cards{display:flex;flex-wrap:wrap;gap:16px}
.card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:10px 14px;
max-width:min(100%,600px);overflow-x:auto;box-sizing:border-box}
.card.wide{max-width:100%}
.card h3{margin:4px 0 8px;font-size:15px}
table.grid{border-collapse:collapse;margin:10px 0;background:#fff}
table.grid th,table.grid td{border:1px solid #ddd;padding:4px 8px;text-align:left;
vertical-align:top}
table.grid thead th{background:#eef1f4}
table.matrix td{text-align:center;min-width:60px}
td.diag{color:#aaa}
.note{color:#555;max-width:900px}
.warn{color:#b00}
.lvl-LOW,.lvl-NONE{color:#b00;font-weight:bold}
.lvl-PARTIAL{color:#a60}
.legend .key{margin-right:14px;white-space:nowrap}
.legend i{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px}
details p{margin:4px 0;max-width:560px;white-space:pre-wrap}
#flag-filter{margin:6px 0;padding:5px 8px;width:320px}
footer{color:#777;padding:0 28px 20px}
.headline{font-size:15px;max-width:900px}
.finding-better{color:#070;font-weight:bold}
.finding-worse{color:#b00;font-weight:bold}
"""
    + RECORDS_STYLE
)

# Filters the flagged table as one types, and the record view by flag, judge and dimension.
SCRIPT = (
    RECORDS_SCRIPT
    + """
document.getElementById('flag-filter')?.addEventListener('input', function (event) {
  const needle = event.target.value.toLowerCase();
  for (const row of document.querySelectorAll('#flagged-table tr.flag-row')) {
    row.hidden = needle !== '' && !row.textContent.toLowerCase().includes(needle);
  }
});
"""
)


def build_sections(config: BatchConfig) -> list[Section]:
    judges = [j.name for j in config.panel]
    records = RecordsSection(judges, [d.name for d in config.dimensions])
    if config.pairwise is not None:  # preferences for A, not scores on the dimension's scale
        return [
            PairwiseSection(config.dimensions),
            PairwiseJudgesSection(config.dimensions, judges),
            AgreementSection(judges),
            *trust_sections(),
            FlaggedSection(judges),
            records,
        ]
    several = [DimensionCorrelationSection()] if len(config.dimensions) > 1 else []
    return [
        DistributionSection(config.dimensions),
        JudgeComparisonSection(config.dimensions, judges),
        *several,
        AgreementSection(judges),
        *trust_sections(),
        FlaggedSection(judges),
        records,
    ]


def _items(sessions: Sessions, batch_id: str, item_ids: list[str]) -> dict[str, Item]:
    found: dict[str, Item] = {}
    for item_id in dict.fromkeys(item_ids):
        try:
            found[item_id] = load_item(sessions, batch_id, item_id)
        except UnknownBatchError:
            continue
    return found


def _stat(label: str, value: str) -> str:
    return f'<div class="stat"><b>{html_text(value)}</b>{html_text(label)}</div>'


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "—"
    aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return f"{aware:%Y-%m-%d %H:%M:%S} UTC"


def _header(
    status: BatchStatus, config: BatchConfig, n_records: int, n_passed: int, alarm: str
) -> str:
    panel = ", ".join(
        f"{j.name} ({j.model}, n={j.n}{f', weight {j.weight:g}' if j.weight != 1 else ''})"
        for j in config.panel
    )
    stats = [
        ("status", status.status.value),
        ("items", f"{status.n_items:,}"),
        ("verdicts", f"{n_records:,} / {status.n_cells:,}"),
        ("passed", f"{n_passed:,}"),
        ("flagged for review", f"{status.n_flagged:,}"),
        ("judgments", f"{status.n_samples:,}"),
        ("failed judgments", f"{status.n_failed_samples:,}"),
        ("cost", f"${status.cost_usd:.4f}"),
    ]
    error = f'<p class="warn">{html_text(status.error)}</p>' if status.error else ""
    aggregation = config.aggregation
    return (
        f"<header><h1>{html_text(status.name)} — jury report</h1>"
        f'<div class="sub">batch {html_text(status.batch_id)} · submitted '
        f"{_when(status.created_at)} · finished {_when(status.finished_at)}</div></header>"
        '<nav><a href="#summary">Summary</a><a href="#distribution">Distribution</a>'
        '<a href="#judges">Judges</a><a href="#agreement">Agreement</a>'
        '<a href="#panel-help">Does the panel help?</a><a href="#people">People</a>'
        '<a href="#flagged">Flagged</a><a href="#records">Records</a></nav><main>'
        f'{alarm}<section id="summary"><h2>Summary</h2>'
        f'<div class="stats">{"".join(_stat(k, v) for k, v in stats)}</div>{error}'
        f'<p class="note"><b>Panel</b>: {html_text(panel)}. <b>Aggregation</b>: '
        f"{html_text(aggregation.within_model)} within each judge, "
        f"{html_text(aggregation.across_models)} across judges; consensus LOW (flagged) above a "
        f"cross-judge standard deviation of {aggregation.consensus_threshold:g}.</p></section>"
    )


def build_report(sessions: Sessions, batch_id: str) -> str:
    """The whole page, reading the batch's records once."""
    status = batch_status(sessions, batch_id)
    config = load_config(sessions, batch_id)
    sections = build_sections(config)
    n_records = n_passed = 0
    for verdict in read_records(sessions, batch_id, config):
        n_records += 1
        n_passed += verdict.passed is True
        for section in sections:
            section.add(verdict)
    for section in sections:
        if isinstance(section, FlaggedSection):
            section.items = _items(sessions, batch_id, [v.item_id for v in section.kept()])
        if isinstance(section, RecordsSection):
            found = samples_of_items(sessions, batch_id, section.item_ids())
            section.set_samples(in_panel_order(config, found))
    alarm = alarm_html(status, judge_failures(sessions, batch_id, config))
    body = "".join(
        f'<section id="{s.anchor}"><h2>{html_text(s.title)}</h2>{s.html()}</section>'
        for s in sections
    ) + provider_batches_html(sessions, batch_id)
    generated = datetime.now(UTC)
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html_text(status.name)} — jury report {html_text(batch_id)}</title>"
        f"<style>{STYLE}</style></head><body>"
        + _header(status, config, n_records, n_passed, alarm)
        + body
        + f"</main><footer>Generated by jury at {_when(generated)} from "
        f"{n_records:,} result records. Self-contained: this page fetches nothing.</footer>"
        f"<script>{SCRIPT}</script></body></html>\n"
    )


def write_report(sessions: Sessions, batch_id: str, output: Path) -> int:
    """Write the page to `output`; returns its size in bytes."""
    page = build_report(sessions, batch_id)
    try:
        output.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise JuryError(f"cannot write the report to {output}: {exc.strerror or exc}") from None
    return len(page.encode())
