"""What `jury status` and `jury cancel` show of a batch's provider batches (docs/batch-api.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.table import Table

from jury.results.terminal import safe_text
from jury.schemas.identifiers import html_text
from jury.schemas.provider_batches import STORED
from jury.store.provider_batches import provider_batches
from jury.store.sql import Sessions


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def provider_batches_json(sessions: Sessions, batch_id: str) -> list[dict[str, Any]]:
    now = datetime.now(UTC)
    return [
        {
            "id": b.id,
            "judge": b.judge,
            "model": b.model,
            "state": b.state,
            "provider_id": b.provider_id,
            "provider_status": b.provider_status,
            "requests": b.requests,
            "done": b.done,
            "failed": b.failed,
            "age_s": round(b.age_s(now), 1),
        }
        for b in provider_batches(sessions, batch_id)
    ]


def print_provider_batches(sessions: Sessions, batch_id: str, console: Console) -> None:
    """A table of the batch's provider batches; nothing when it has none."""
    shown = provider_batches(sessions, batch_id)
    if not shown:
        return
    now = datetime.now(UTC)
    table = Table(title="provider batches (batch API)", header_style="bold")
    for column in ("judge", "provider batch", "state", "requests", "done", "failed", "age"):
        numbers = column in ("requests", "done", "failed", "age")
        table.add_column(column, justify="right" if numbers else "left")
    for b in shown:
        state = b.state if b.provider_status is None else f"{b.state} ({b.provider_status})"
        table.add_row(
            safe_text(b.judge),
            safe_text(b.provider_id or "(being submitted)"),
            safe_text(state),
            f"{b.requests:,}",
            f"{b.done:,}",
            f"{b.failed:,}",
            _age(b.age_s(now)),
        )
    console.print(table)


def open_provider_batches(sessions: Sessions, batch_id: str) -> int:
    return sum(b.state != STORED for b in provider_batches(sessions, batch_id))


def provider_batches_html(sessions: Sessions, batch_id: str) -> str:
    """The report's section on provider batches; empty when the batch has none."""
    rows = provider_batches_json(sessions, batch_id)
    if not rows:
        return ""
    head = "".join(
        f"<th>{name}</th>"
        for name in ("judge", "provider batch", "state", "requests", "done", "failed", "age")
    )
    body = "".join(
        "<tr>"
        f"<td>{html_text(r['judge'])}</td>"
        f"<td>{html_text(r['provider_id'] or '(being submitted)')}</td>"
        f"<td>{html_text(r['state'])}"
        f"{html_text(' (' + r['provider_status'] + ')') if r['provider_status'] else ''}</td>"
        f"<td>{r['requests']:,}</td><td>{r['done']:,}</td><td>{r['failed']:,}</td>"
        f"<td>{_age(r['age_s'])}</td></tr>"
        for r in rows
    )
    return (
        '<section id="provider-batches"><h2>Provider batches (batch API)</h2>'
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></section>"
    )
