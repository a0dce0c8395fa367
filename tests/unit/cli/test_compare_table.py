"""`jury compare`'s tables read whole on an 80-column terminal: no header cut down to "B"."""

from __future__ import annotations

from rich.console import Console

from jury.analysis.comparison import Comparison, ScoreAgreement, Usage
from jury.cli.compare import print_comparison

USAGE = Usage(
    n_items=32,
    latency_ms_median=12345.0,
    latency_ms_mean=13000.0,
    prompt_tokens_per_item=123456.0,
    completion_tokens_per_item=3456.0,
    prompt_tokens=100,
    completion_tokens=10,
    cost_usd=0.1,
)


def test_every_header_and_figure_is_shown_whole_at_80_columns() -> None:
    row = ScoreAgreement(
        dimension="cross_disciplinary_coherence",
        n_items=32,
        pearson=0.91,
        spearman=0.88,
        mean_abs_diff=0.31,
        mean_a=3.4,
        mean_b=3.5,
        a=USAGE,
        b=USAGE,
    )
    result = Comparison(
        batch_a="20261128-052837-47b75e",
        batch_b="20261128-052854-af6366",
        n_items=32,
        dimensions=[row],
        a=USAGE,
        b=USAGE,
        latency_change_pct=-12.0,
        prompt_tokens_ratio=0.5,
    )
    console = Console(width=80, record=True)
    print_comparison(console, result, ("per-dimension", "combined"))
    text = console.export_text()
    assert "…" not in text
    for header in ("mean A", "mean B", "Pearson", "Spearman", "latency A", "latency B"):
        assert header in text
    assert "tokens A" in text and "tokens B" in text
    assert text.count("12,345 ms") == 4 and text.count("123,456+3,456") == 4
    # A long dimension name is folded onto a second line where the figures need the room.
    lines = text.splitlines()
    names = [
        line.split()[0] + lines[n + 1].split()[0]
        for n, line in enumerate(lines)
        if line.startswith(" cross_")
    ]
    assert names == ["cross_disciplinary_coherence"] * 2
