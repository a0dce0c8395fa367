"""`jury compare BATCH_A BATCH_B`: two batches over the same items, per dimension: how alike
their scores are, and what each cost in per-item latency, tokens and money
(schemas.comparison). The orthogonality experiment's comparison of the per-dimension and the
combined mode is `jury compare <per-dimension batch> <combined batch>`."""

from __future__ import annotations

import json
from typing import Any

import click
from rich import box
from rich.console import Console
from rich.table import Table

from jury.analysis.comparison import BatchUsage, Comparison, Usage, compare_batches
from jury.errors import JuryError
from jury.results.formats import make_console
from jury.results.labelled import read_records
from jury.results.terminal import safe_text
from jury.store.engine import session_factory
from jury.store.inspection import iter_batch_samples
from jury.store.repository import batch_status, load_config
from jury.store.sql import Sessions


def _usage(sessions: Sessions, batch_id: str) -> BatchUsage:
    usage = BatchUsage()
    for sample in iter_batch_samples(sessions, batch_id):
        usage.add(sample.item_id, sample.dimension, sample.result)
    return usage


def comparison(sessions: Sessions, first: str, second: str) -> Comparison:
    configs = load_config(sessions, first), load_config(sessions, second)
    names = [d.name for d in configs[1].dimensions]
    dimensions = [d.name for d in configs[0].dimensions if d.name in names]
    if not dimensions:
        raise JuryError(f"batches {first} and {second} judge no dimension in common")
    result = compare_batches(
        (first, second),
        (read_records(sessions, first, configs[0]), read_records(sessions, second, configs[1])),
        (_usage(sessions, first), _usage(sessions, second)),
        dimensions,
    )
    if not result.n_items:
        raise JuryError(f"batches {first} and {second} have no judged item in common")
    return result


def _num(value: float | None, spec: str = ".2f") -> str:
    return "—" if value is None else format(value, spec)


def _latency(usage: Usage) -> str:
    return f"{_num(usage.latency_ms_median, ',.0f')} ms"


def _tokens(usage: Usage) -> str:
    return (
        f"{_num(usage.prompt_tokens_per_item, ',.0f')}+"
        f"{_num(usage.completion_tokens_per_item, ',.0f')}"
    )


def _table(title: str, columns: tuple[str, ...]) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False)
    for name in columns:
        # Headers and figures are never cut or wrapped; a long dimension name wraps.
        first = name == "dimension"
        table.add_column(
            name,
            justify="left" if first else "right",
            no_wrap=not first,
            overflow="fold" if first else "ellipsis",
        )
    return table


def print_comparison(console: Console, result: Comparison, names: tuple[str, str]) -> None:
    console.print(
        safe_text(
            f"A = {names[0]} ({result.batch_a}), B = {names[1]} ({result.batch_b}): "
            f"{result.n_items} items in common"
        ),
        highlight=False,
    )
    # Two tables narrow enough for an 80-column terminal: how alike the scores are, then what
    # an item cost each batch (one wide table had rich cut its headers down to "B").
    scores = _table(
        "final scores",
        ("dimension", "items", "mean A", "mean B", "|A−B|", "Pearson", "Spearman"),
    )
    usage = _table(
        "per item: latency (median of its slowest call), tokens (prompt+completion)",
        ("dimension", "latency A", "latency B", "tokens A", "tokens B"),
    )
    for row in result.dimensions:
        scores.add_row(
            safe_text(row.dimension),
            str(row.n_items),
            _num(row.mean_a),
            _num(row.mean_b),
            _num(row.mean_abs_diff),
            _num(row.pearson),
            _num(row.spearman),
        )
        usage.add_row(
            safe_text(row.dimension),
            _latency(row.a),
            _latency(row.b),
            _tokens(row.a),
            _tokens(row.b),
        )
    usage.add_row(
        "all", _latency(result.a), _latency(result.b), _tokens(result.a), _tokens(result.b)
    )
    console.print(scores)
    console.print(usage)
    console.print(
        f"cost: A ${result.a.cost_usd:.4f}, B ${result.b.cost_usd:.4f}; median latency per "
        f"item, B against A: {_num(result.latency_change_pct, '+.1f')}%; prompt tokens per "
        f"item, B over A: {_num(result.prompt_tokens_ratio, '.2f')}×",
        highlight=False,
    )


def run_compare(first: str, second: str, fmt: str) -> None:
    from jury.cli.common import load_settings

    sessions = session_factory(load_settings().database_url)
    names = batch_status(sessions, first).name, batch_status(sessions, second).name
    result = comparison(sessions, first, second)
    if fmt == "json":
        click.echo(json.dumps(result.model_dump(mode="json")))
        return
    print_comparison(make_console(), result, names)


@click.command()
@click.argument("batch_a")
@click.argument("batch_b")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def compare(**options: Any) -> None:
    """Compare two batches over their common items: per dimension, how alike the scores are
    (Pearson, Spearman, mean absolute difference), each batch's per-item latency (its slowest
    call) and tokens; the cost of each."""
    from jury.cli.common import user_errors

    user_errors(run_compare)(options["batch_a"], options["batch_b"], options["fmt"])
