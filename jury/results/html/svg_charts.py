"""Small inline SVG charts for the HTML report: no library, no script, no network.

Every label is escaped here; callers pass plain text. Each chart carries a <title> per mark,
so hovering a bar shows its exact figure.
"""

from __future__ import annotations

from dataclasses import dataclass

from jury.schemas.identifiers import html_text

# Colour-blind-safe palette (Okabe-Ito), one colour per judge, in panel order.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000")
AXIS = "#666"
FONT = 'font-family="system-ui, sans-serif" font-size="11"'


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _clip(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


def _svg(width: int, height: int, body: list[str], label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{html_text(label)}" {FONT}>'
        f"<title>{html_text(label)}</title>{''.join(body)}</svg>"
    )


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    tooltip: str
    highlight: bool = False


def histogram(bars: list[Bar], label: str, width: int = 360, height: int = 170) -> str:
    """Vertical bars (counts) with their labels beneath; highlighted bars in a second colour."""
    left, bottom, top = 30, 34, 14
    plot_h = height - bottom - top
    peak = max((b.value for b in bars), default=0) or 1
    step = (width - left - 6) / max(len(bars), 1)
    body = [
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - 4}" y2="{height - bottom}" '
        f'stroke="{AXIS}"/>',
        f'<text x="{left - 4}" y="{top + 4}" text-anchor="end" fill="{AXIS}">{_num(peak)}</text>',
        f'<text x="{left - 4}" y="{height - bottom}" text-anchor="end" fill="{AXIS}">0</text>',
    ]
    for i, bar in enumerate(bars):
        h = plot_h * bar.value / peak
        x = left + i * step + 1
        fill = colour(0) if bar.highlight else "#B0B0B0"
        body.append(
            f'<rect x="{x:.1f}" y="{height - bottom - h:.1f}" width="{max(step - 2, 1):.1f}" '
            f'height="{h:.1f}" fill="{fill}"><title>{html_text(bar.tooltip)}</title></rect>'
        )
        body.append(
            f'<text x="{x + step / 2 - 1:.1f}" y="{height - bottom + 13}" text-anchor="middle" '
            f'fill="{AXIS}">{html_text(bar.label)}</text>'
        )
    return _svg(width, height, body, label)


@dataclass(frozen=True)
class Series:
    name: str
    values: list[float | None]  # one per group; None: no score


def grouped_bars(
    groups: list[str],
    series: list[Series],
    low: float,
    high: float,
    label: str,
    marker: float | None = None,
) -> str:
    """One group of bars per dimension, one bar per judge, on the score scale [low, high];
    `marker` draws a dashed line (the pass threshold)."""
    left, bottom, top, group_gap = 30, 34, 10, 30
    bar_w = 18
    group_w = bar_w * max(len(series), 1) + group_gap
    width = max(left + group_w * len(groups) + 10, 260)
    label_chars = max(int(group_w / 6.5), 4)
    height = 190
    plot_h = height - bottom - top
    span = (high - low) or 1

    def y(value: float) -> float:
        return top + plot_h * (1 - (min(max(value, low), high) - low) / span)

    body = [
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - 4}" y2="{height - bottom}" '
        f'stroke="{AXIS}"/>'
    ]
    for tick in (low, (low + high) / 2, high):
        body.append(
            f'<text x="{left - 4}" y="{y(tick) + 4:.1f}" text-anchor="end" '
            f'fill="{AXIS}">{_num(tick)}</text>'
        )
    if marker is not None:
        body.append(
            f'<line x1="{left}" y1="{y(marker):.1f}" x2="{width - 4}" y2="{y(marker):.1f}" '
            f'stroke="#C00" stroke-dasharray="4 3"><title>threshold {_num(marker)}</title></line>'
        )
    for g, group in enumerate(groups):
        x0 = left + g * group_w + group_gap / 2
        for s, one in enumerate(series):
            value = one.values[g]
            if value is None:
                continue
            body.append(
                f'<rect x="{x0 + s * bar_w:.1f}" y="{y(value):.1f}" width="{bar_w - 2}" '
                f'height="{height - bottom - y(value):.1f}" fill="{colour(s)}">'
                f"<title>{html_text(one.name)} on {html_text(group)}: {value:.2f}</title></rect>"
            )
        body.append(
            f'<text x="{x0 + (group_w - group_gap) / 2:.1f}" y="{height - bottom + 13}" '
            f'text-anchor="middle" fill="{AXIS}">{html_text(_clip(group, label_chars))}</text>'
        )
    return _svg(int(width), height, body, label)


def diverging_bars(rows: list[tuple[str, float | None]], label: str, limit: float) -> str:
    """Horizontal bars left or right of zero (a judge's mean offset from the panel)."""
    row_h, label_w, width = 22, 230, 520
    height = row_h * max(len(rows), 1) + 22
    half = (width - label_w - 50) / 2
    zero = label_w + half
    scale = half / (limit or 1)
    body = [
        f'<line x1="{zero}" y1="4" x2="{zero}" y2="{height - 16}" stroke="{AXIS}"/>',
        f'<text x="{zero}" y="{height - 4}" text-anchor="middle" fill="{AXIS}">0</text>',
        f'<text x="{zero - half}" y="{height - 4}" text-anchor="start" '
        f'fill="{AXIS}">−{_num(limit)} (harsher)</text>',
        f'<text x="{zero + half}" y="{height - 4}" text-anchor="end" '
        f'fill="{AXIS}">+{_num(limit)} (kinder)</text>',
    ]
    for i, (name, value) in enumerate(rows):
        y = 4 + i * row_h
        shown = "—" if value is None else f"{value:+.2f}"
        body.append(
            f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">'
            f"{html_text(_clip(name, 24))} {shown}</text>"
        )
        if value is None:
            continue
        w = abs(value) * scale
        x = zero if value >= 0 else zero - w
        body.append(
            f'<rect x="{x:.1f}" y="{y + 3}" width="{max(w, 1):.1f}" height="{row_h - 8}" '
            f'fill="{colour(i)}"><title>{html_text(name)}: {value:+.3f}</title></rect>'
        )
    return _svg(width, height, body, label)
