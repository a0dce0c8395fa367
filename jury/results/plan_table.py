"""`jury submit --dry-run`: the plan as a table, with unpriced judges marked."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from jury.batchfile.planning import BatchPlan
from jury.results.terminal import safe_text


def print_plan(console: Console, name: str, plan: BatchPlan) -> None:
    table = Table(title=safe_text(f"{name}: plan (dry run, nothing enqueued)"), header_style="bold")
    for column in ("judge", "model", "calls", "prompt tokens", "completion tokens", "cost USD"):
        table.add_column(column, justify="left" if column in ("judge", "model") else "right")
    for j in plan.judges:
        cost = Text("unpriced", style="yellow") if j.cost_usd is None else f"{j.cost_usd:.4f}"
        table.add_row(
            safe_text(j.judge + (" (batch API)" if j.batch_api else "")),
            safe_text(j.model),
            f"{j.calls:,}",
            f"~{j.prompt_tokens:,}",
            f"~{j.completion_tokens:,}",
            cost,
        )
    for g in plan.generation:
        if g.is_llm:
            written: str | Text = (
                Text("unpriced", style="yellow") if g.cost_usd is None else f"{g.cost_usd:.4f}"
            )
        else:
            written = Text("its own", style="dim")  # an HTTP endpoint's price is not jury's
        table.add_row(
            safe_text(f"{g.candidate} (writes outputs)"),
            safe_text(g.target),
            f"{g.calls:,}",
            f"~{g.prompt_tokens:,}" if g.is_llm else "",
            f"≤{g.completion_tokens:,}" if g.is_llm else "",
            written,
        )
    console.print(table)
    total = (
        "unknown (a judge is unpriced, below)"
        if plan.cost_usd is None
        else f"~${plan.cost_usd:.4f}"
    )
    shape = (
        f"{plan.n_items:,} items × {plan.n_dimensions} dimensions"
        if plan.n_cells == plan.n_items * plan.n_dimensions
        else f"{plan.n_items:,} items, each on its own dimensions,"
    )
    console.print(
        f"{shape} = {plan.n_cells:,} verdicts; {plan.calls:,} judge calls"
        + (
            f", {sum(g.calls for g in plan.generation):,} generation calls"
            if plan.generation
            else ""
        )
        + f"; estimated cost {total}",
        highlight=False,
    )
    if any(j.batch_api for j in plan.judges):
        console.print(
            f"batch API: ~${plan.batch_api_saving_usd:.4f} saved against live calls (the batch "
            "judges' cost above is at batch price; their verdicts come within the provider's "
            "batch window, up to 24 h)",
            highlight=False,
        )
    for j in plan.judges:
        if not j.priced:
            console.print(
                Text(
                    f"unpriced: {j.judge} ({j.model}) is not in LiteLLM's price map; its calls "
                    "are left out of the estimate and a max_cost_usd budget would refuse the "
                    "batch. Declare input_cost_per_token and output_cost_per_token for it.",
                    style="yellow",
                )
            )
    if plan.first_round_calls is not None:
        console.print(
            f"adaptive: {plan.first_round_calls:,} calls in the first round; the calls and cost "
            "above are the cap, spent only on cells the first round leaves uncertain",
            highlight=False,
        )
