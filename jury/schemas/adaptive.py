"""Adaptive sampling: a first, cheaper round for every cell, the rest only where it helps.

With `adaptive:` in the batch file, each cell is first judged with `initial_samples` samples
from each judge that is not a `reserve` judge. A cell whose first round is uncertain (the
judges' scores spread more than `max_std`, a judge's own samples spread more than that, or a
sample failed) is escalated once: the remaining samples of every judge, up to its `n`, and the
reserve judges are called, and its verdict uses them all. Other cells keep their first-round
verdict, and the calls they did not need are saved.

Pure functions of the batch config and a verdict: the producer publishes the first round, the
worker decides on escalation, `jury resume` and the sweeper know which samples a cell expects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from jury.schemas.batch import BatchConfig, Judge
    from jury.schemas.results import Verdict


class Adaptive(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    # Samples per judge in the first round (a judge with a smaller `n` gives all of its own).
    initial_samples: int = Field(default=1, ge=1, le=100)
    # Escalate a cell whose standard deviation across judges, or within one judge, exceeds
    # this (on the dimension's scale).
    max_std: float = Field(default=0.5, ge=0, le=1e6)


def first_round_panel(config: BatchConfig) -> list[Judge]:
    """The judges of the first round, each with the samples it gives there."""
    if config.adaptive is None:
        return config.panel
    initial = config.adaptive.initial_samples
    return [
        judge.model_copy(update={"n": min(initial, judge.n)})
        for judge in config.panel
        if not judge.reserve
    ]


def samples_of(panel: list[Judge]) -> list[tuple[str, int]]:
    return [(judge.name, index) for judge in panel for index in range(judge.n)]


def first_round(config: BatchConfig) -> list[tuple[str, int]]:
    """(judge, sample index) of every cell's first round; all of them without `adaptive`."""
    return samples_of(first_round_panel(config))


def escalation(config: BatchConfig) -> list[tuple[str, int]]:
    """What an escalated cell adds to its first round."""
    first = set(first_round(config))
    return [key for key in samples_of(config.panel) if key not in first]


def is_uncertain(verdict: Verdict, max_std: float) -> bool:
    """Whether a first-round verdict is worth more calls."""
    metrics = verdict.consensus_metrics
    if metrics.final_score is None or verdict.error:
        return True
    if any(e.n_failed or not e.samples for e in verdict.llm_evaluations.values()):
        return True
    spreads = [metrics.cross_model_std or 0.0]
    spreads += [e.within_model_std or 0.0 for e in verdict.llm_evaluations.values()]
    return max(spreads) > max_std
