"""`jury cancel` and `jury resume`: stopping a batch, and judging again what it lacks."""

from __future__ import annotations

from dataclasses import dataclass, field

from celery import Celery

from jury.broker.budget import BudgetMeter
from jury.broker.live_tasks import LiveTasks, live_tasks
from jury.broker.parking import Parking
from jury.broker.redis_client import BrokerRedis
from jury.errors import JuryError
from jury.producer.publishing import Publisher, cell_samples
from jury.schemas.batch import BatchConfig
from jury.schemas.calls import task_refs
from jury.schemas.status import BatchState
from jury.schemas.tasks import CellRef, GenerationRef, SampleRef
from jury.settings import Settings
from jury.store.cells import reopen_cells
from jury.store.generations import ungenerated_refs
from jury.store.missing import missing_samples
from jury.store.repository import (
    batch_status,
    load_config,
    reopen_batch,
    set_batch_state,
    set_max_cost,
)
from jury.store.samples import stored_cost
from jury.store.sql import Sessions


def cancel_batch(sessions: Sessions, batch_id: str) -> BatchState:
    """Mark the batch cancelled: workers skip its queued tasks; what is stored stays."""
    status = batch_status(sessions, batch_id)
    if status.status.finished:
        return status.status
    set_batch_state(sessions, batch_id, BatchState.CANCELLED, error="cancelled by the user")
    return BatchState.CANCELLED


def drop_parked_tasks(settings: Settings, batch_id: str) -> int:
    """A cancelled batch's tasks parked for a rate-limit slot (by the producer's pacing, or
    by a worker) are removed rather than left to come back, perhaps hours later, only to be
    skipped: meanwhile they would hold up other submissions (JURY_MAX_QUEUED counts them).
    `jury resume` queues whatever the batch still lacks. Returns how many."""
    broker = BrokerRedis.from_settings(settings)
    try:
        return Parking(broker).drop_batch(settings.all_queues, batch_id)
    finally:
        broker.close()


@dataclass(frozen=True)
class ResumePlan:
    cells: dict[tuple[str, str], list[tuple[str, int]]]  # (item, dimension) -> samples to judge
    failed: dict[tuple[str, str], list[tuple[str, int]]]  # of those, the stored failures
    # A batch with candidates: the generation tasks of items whose judging was never queued.
    generations: list[GenerationRef] = field(default_factory=list)

    @property
    def n_samples(self) -> int:
        return sum(len(samples) for samples in self.cells.values())


def plan_resume(sessions: Sessions, batch_id: str, missing_only: bool) -> ResumePlan:
    """Samples with no stored result, and (unless `missing_only`) those stored as failures."""
    config = load_config(sessions, batch_id)
    names = [c.name for c in config.candidates]
    ungenerated = ungenerated_refs(sessions, batch_id, names) if names else []
    return ResumePlan(*missing_samples(sessions, batch_id, config, missing_only), ungenerated)


def resume_batch(
    sessions: Sessions, app: Celery, batch_id: str, missing_only: bool, force: bool = False
) -> ResumePlan:
    """Queue again what the batch lacks: judge tasks with no stored sample, and (unless
    `missing_only`) those stored as failures. Waits for room like a submission does.

    Never pays twice: a running batch with live tasks (queued, held by a worker, parked or
    waiting for a slot) is refused (LiveTasksError), since those tasks will judge what they
    hold. A batch that stopped (its budget, a cancel) is reopened first, as with `force`: its
    live tasks then run rather than being skipped, and only the samples no live task holds
    are queued."""
    config = load_config(sessions, batch_id)
    publisher = Publisher(app, config)
    try:
        live = live_tasks(publisher.broker, publisher.all_queues, batch_id)
        state = batch_status(sessions, batch_id).status
        if live.total and state == BatchState.RUNNING and not force:
            raise LiveTasksError(batch_id, live)
        if live.total and state in (BatchState.STOPPED, BatchState.CANCELLED):
            reopen_batch(sessions, batch_id)
            live = live_tasks(publisher.broker, publisher.all_queues, batch_id)
        # Scan, plan, scan and plan again: a message is in no list while a worker takes it
        # (between BRPOP and kombu's `unacked` entry), and a task may store its sample between
        # a scan and a plan. A sample planned twice and seen live by neither scan has none.
        first = plan_resume(sessions, batch_id, missing_only)
        live.merge(live_tasks(publisher.broker, publisher.all_queues, batch_id))
        second = plan_resume(sessions, batch_id, missing_only)
        plan = _without(_in_both(first, second), batch_id, live)
        if not plan.cells and not plan.generations:
            return plan
        reopen_cells(sessions, batch_id, plan.failed)
        reopen_batch(sessions, batch_id)
        _publish_plan(publisher, config, batch_id, plan)
    finally:
        publisher.close()
    return plan


class LiveTasksError(JuryError):
    def __init__(self, batch_id: str, live: LiveTasks) -> None:
        super().__init__(
            f"batch {batch_id} still has {live.total} live tasks ({live.describe()}); they "
            "will judge what they hold, and queuing their samples again would pay for them "
            f"twice. Follow it with `jury status {batch_id} --follow`, or run `jury resume "
            f"{batch_id} --force` to queue only what no live task will produce"
        )
        self.live = live


def _without(plan: ResumePlan, batch_id: str, live: LiveTasks) -> ResumePlan:
    """The plan less whatever a live task will produce."""
    if not live.total:
        return plan
    cells: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for (item_id, dimension), samples in plan.cells.items():
        kept = [
            (judge, sample)
            for judge, sample in samples
            if SampleRef(batch_id, item_id, dimension, judge, sample) not in live.samples
        ]
        if kept:
            cells[(item_id, dimension)] = kept
    failed = {cell: s for cell, s in plan.failed.items() if cell in cells}
    generations = [g for g in plan.generations if g not in live.generations]
    return ResumePlan(cells, failed, generations)


def _in_both(first: ResumePlan, second: ResumePlan) -> ResumePlan:
    cells: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for cell, samples in second.cells.items():
        earlier = set(first.cells.get(cell, ()))
        kept = [s for s in samples if s in earlier]
        if kept:
            cells[cell] = kept
    failed = {cell: s for cell, s in second.failed.items() if cell in cells}
    generations = [g for g in second.generations if g in set(first.generations)]
    return ResumePlan(cells, failed, generations)


def _publish_plan(
    publisher: Publisher, config: BatchConfig, batch_id: str, plan: ResumePlan
) -> None:
    wave: list[SampleRef] = []
    for (item_id, dimension), samples in plan.cells.items():
        wave.extend(cell_samples(CellRef(batch_id, item_id, dimension), samples))
        if len(wave) >= publisher.wave_size:
            publisher.wait_for_room(len(wave))
            publisher.publish(task_refs(config, wave))
            wave = []
    if wave:
        publisher.wait_for_room(len(wave))
        publisher.publish(task_refs(config, wave))
    if plan.generations:
        publisher.wait_for_room(len(plan.generations))
        publisher.publish_generations(plan.generations)


def raise_budget(
    sessions: Sessions, settings: Settings, batch_id: str, max_cost_usd: float
) -> None:
    """A new cap for the batch, in the stored config and in the meter every worker reads."""
    set_max_cost(sessions, batch_id, max_cost_usd)
    broker = BrokerRedis.from_settings(settings)
    try:
        meter = BudgetMeter(broker, settings.queue, lambda b: stored_cost(sessions, b))
        meter.set_cap(batch_id, max_cost_usd)
    finally:
        broker.close()
