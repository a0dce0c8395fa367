"""The chord callback: a complete cell's within-model, then cross-model aggregation, consensus,
pass/fail and the verdict write (the `jury.aggregate_cell` task is a thin adapter onto this).

It runs once per complete cell (the barrier in jury.worker.judging.pipeline sends it), and is
idempotent: a second run writes nothing new (unique keys), so the sweeper, its safety net,
may run it for any complete cell still without a verdict. An adaptive cell's first round may
instead be escalated: every sample and the reserve judges are queued (once, whoever gets there
first), and the callback of the escalated round builds the verdict.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

from redis.exceptions import RedisError

from jury.errors import JuryError, MessageRefused
from jury.schemas.adaptive import escalation, first_round_panel, is_uncertain
from jury.schemas.batch import BatchConfig, Judge
from jury.schemas.calls import task_refs
from jury.schemas.output_sets import pair_names
from jury.schemas.results import SampleResult, Verdict
from jury.schemas.sample_checks import counted
from jury.schemas.tasks import CellRef, SampleRef
from jury.store.cells import CellVerdict, save_cells
from jury.store.escalations import is_escalated, mark_escalated
from jury.store.samples import pair_judgments, samples_of_cells
from jury.worker.judging.aggregation import build_verdict, cell_pass_vote
from jury.worker.judging.message_checks import check_cell
from jury.worker.judging.pairwise_verdict import build_pairwise_verdict
from jury.worker.metrics import recording as metrics
from jury.worker.runtime import WorkerRuntime

log = logging.getLogger("jury.worker")


class CellIncomplete(JuryError):
    """The aggregation ran before every sample the cell expects was stored."""

    def __init__(self, cell: CellRef, missing: list[tuple[str, int]]) -> None:
        super().__init__(f"{cell} is missing {len(missing)} samples, e.g. {missing[:3]}")
        self.missing = missing


@dataclass(frozen=True)
class AggregateOutcome:
    """What the callback did: the verdict it built (or found), or the escalation it queued."""

    verdict: Verdict | None = None
    escalated: int = 0  # judge tasks queued for an uncertain first round

    def summary(self) -> dict[str, object]:
        """The callback task's result, as Flower and the worker log show it."""
        if self.verdict is None:
            return {"escalated": self.escalated}
        metrics = self.verdict.consensus_metrics
        return {
            "final_score": metrics.final_score,
            "consensus": metrics.consensus_level,
            "passed": self.verdict.passed,
            "flagged": metrics.flag_for_review,
        }


def aggregate_cell(runtime: WorkerRuntime, cell: CellRef) -> AggregateOutcome:
    """Build and store the cell's verdict, or escalate its uncertain first round."""
    outcome = aggregate_cells(runtime, [cell])[0]
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


Outcome = AggregateOutcome | CellIncomplete | MessageRefused


def aggregate_cells(runtime: WorkerRuntime, cells: Sequence[CellRef]) -> list[Outcome]:
    """The callbacks of many cells at once (the engine groups them): their samples read in
    one query, their verdicts written in one transaction. A cell missing a sample gets its
    CellIncomplete, a cell its batch does not have (a forged or stale message) its
    MessageRefused; the others their outcome."""
    runtime.read_items((cell.batch_id, cell.item_id) for cell in cells)
    refusals = {cell: check_cell(runtime, cell) for cell in cells}
    stored = samples_of_cells(runtime.sessions, [c for c in cells if refusals[c] is None])
    outcomes: list[Outcome] = []
    pending: list[tuple[int, CellVerdict]] = []
    for cell in cells:
        refusal = refusals[cell]
        if refusal is not None:
            outcomes.append(refusal)
            continue
        try:
            decided = _decide(runtime, cell, stored.get(cell, []))
        except CellIncomplete as exc:
            outcomes.append(exc)
            continue
        if isinstance(decided, AggregateOutcome):
            outcomes.append(decided)
        else:
            pending.append((len(outcomes), decided))
            outcomes.append(AggregateOutcome(decided.verdict))
    _with_positions(runtime, pending)
    saved = save_cells(runtime.sessions, [entry for _, entry in pending])
    metrics.verdicts_stored(sum(saved.written))
    for batch_id in saved.ended:
        forget_batch(runtime, batch_id)
    return outcomes


def forget_batch(runtime: WorkerRuntime, batch_id: str) -> None:
    """The batch has ended: its keys go from Redis. Should Redis fail here, they lapse on
    their own (each has a time to live); the verdicts are stored either way."""
    try:
        runtime.redis.forget_batch(runtime.settings.queue, batch_id)
    except RedisError as exc:
        log.warning("batch %s ended, but its Redis keys stay until they lapse: %s", batch_id, exc)


def _decide(
    runtime: WorkerRuntime, cell: CellRef, stored: list[SampleResult]
) -> CellVerdict | AggregateOutcome:
    """The cell's verdict to write, or (an adaptive cell's uncertain first round) what was
    done instead."""
    config = runtime.config(cell.batch_id)
    if config.adaptive is None or is_escalated(runtime.sessions, cell):
        return _verdict(runtime, cell, config, config.panel, stored)
    entry = _verdict(runtime, cell, config, first_round_panel(config), stored)
    more = escalation(config)
    if more and is_uncertain(entry.verdict, config.adaptive.max_std):
        if not mark_escalated(runtime.sessions, cell):
            return AggregateOutcome()  # another run of this callback escalated it already
        refs = [SampleRef(*cell, judge, index) for judge, index in more]
        tasks = list(task_refs(config, refs))
        runtime.queue_tasks(config, tasks)
        return AggregateOutcome(escalated=len(tasks))
    return entry


def _verdict(
    runtime: WorkerRuntime,
    cell: CellRef,
    config: BatchConfig,
    panel: list[Judge],
    stored: list[SampleResult],
) -> CellVerdict:
    samples = {(s.judge, s.sample): s for s in stored}
    expected = [(j.name, i) for j in panel for i in range(j.n)]
    missing = [key for key in expected if key not in samples]
    if missing:
        raise CellIncomplete(cell, missing)
    dimension = config.dimension(cell.dimension)
    details = pair_judgments(runtime.sessions, cell) if config.pairwise is not None else {}
    # Only samples that could be true count (schemas.sample_checks): a row no worker of this
    # version wrote, with a score off the scale or a cost that is not one, counts as failed.
    kept = [counted(config, dimension, samples[key], details.get(key)) for key in expected]
    if config.pairwise is None:
        verdict = build_verdict(cell.item_id, dimension, panel, kept, config.aggregation)
    else:
        verdict = build_pairwise_verdict(
            cell.item_id,
            dimension,
            panel,
            kept,
            details,
            config.aggregation,
            config.pairwise.tie_tolerance,
            # An item's `outputs` compared pair by pair: its pair item's id names the sides.
            names=pair_names(cell.item_id) or config.pairwise.names,
        )
    if config.pass_vote:
        verdict = verdict.model_copy(update={"pass_vote": cell_pass_vote(panel, kept)})
    dimension_position = [d.name for d in config.dimensions].index(cell.dimension)
    return CellVerdict(cell, kept, verdict, (-1, dimension_position))


def _with_positions(runtime: WorkerRuntime, pending: list[tuple[int, CellVerdict]]) -> None:
    """Fill in each verdict's item position."""
    positions = runtime.item_positions((e.cell.batch_id, e.cell.item_id) for _, e in pending)
    for index, (at, entry) in enumerate(pending):
        item_position = positions[(entry.cell.batch_id, entry.cell.item_id)]
        pending[index] = (at, replace(entry, positions=(item_position, entry.positions[1])))
