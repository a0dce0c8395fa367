"""Whether a task message fits its batch as stored: the worker's half of reading a broker
message as input (its types and bounds are read by jury.schemas.task_messages first).

A message names a batch, an item, a dimension, a judge and a sample index, and may carry
samples to store. Each is checked against what the worker holds anyway, so the check costs
no trip to the store on the common path: the batch's config (cached per worker), the item
(cached), and only for a sample of an adaptive batch's second round, whether its cell was
escalated (one query). A message that does not fit is refused (MessageRefused): dropped with
one log line, nothing called, paid or stored, and never redelivered.
"""

from __future__ import annotations

from collections.abc import Sequence

from jury.errors import MessageRefused, UnknownBatchError
from jury.schemas.adaptive import first_round
from jury.schemas.batch import BatchConfig, Item
from jury.schemas.calls import CallSpec
from jury.schemas.candidates import HTTPCandidate, LLMCandidate
from jury.schemas.item_dimensions import item_dimension_names
from jury.schemas.results import CellSample
from jury.schemas.sample_checks import sample_problem
from jury.schemas.task_messages import refused, shown
from jury.schemas.tasks import CellRef, GenerationRef, SampleRef
from jury.store.escalations import is_escalated
from jury.worker.runtime import WorkerRuntime


def stored_parts(
    runtime: WorkerRuntime, batch_id: str, item_id: str, what: str
) -> tuple[BatchConfig, Item]:
    """The batch's config and the item, as stored; MessageRefused when either is not there
    (a message of another deployment's database, or of a batch or item never recorded)."""
    try:
        return runtime.config(batch_id), runtime.item(batch_id, item_id)
    except UnknownBatchError as exc:
        raise refused(what, str(exc), (batch_id, item_id)) from None


def dimension_problem(config: BatchConfig, item: Item, dimension: str) -> str | None:
    """Why `dimension` is none of those this item is judged on, if it is not."""
    if dimension in item_dimension_names(config, item):
        return None
    if any(d.name == dimension for d in config.dimensions):
        return f"item {shown(item.id)} is not judged on dimension {shown(dimension)}"
    return f"dimension {shown(dimension)} is not one of the batch's"


def check_sample_ref(
    runtime: WorkerRuntime, config: BatchConfig, item: Item, ref: SampleRef
) -> None:
    """MessageRefused unless the task's reference names a sample the batch plans: a judge
    on its panel, an index below that judge's `n` (and, in an adaptive batch, of the first
    round unless the cell was escalated), a dimension of its item (the first of them, for a
    combined task, which names its item's call), an item whose outputs are written."""
    what, named = "judge task", tuple(ref)
    judge = next((j for j in config.panel if j.name == ref.judge), None)
    if judge is None:
        raise refused(
            what, f"judge {shown(ref.judge)} is not on batch {shown(ref.batch_id)}'s panel", named
        )
    if ref.sample >= judge.n:
        raise refused(
            what,
            f"sample index {ref.sample} is not below judge {shown(judge.name)}'s n of {judge.n}",
            named,
        )
    if problem := dimension_problem(config, item, ref.dimension):
        raise refused(what, problem, named)
    dimensions = item_dimension_names(config, item)
    if config.mode == "combined":
        position = {d.name: n for n, d in enumerate(config.dimensions)}
        first = min(dimensions, key=position.__getitem__)
        if ref.dimension != first:
            raise refused(
                what, f"a combined task of item {shown(item.id)} is named by {shown(first)}", named
            )
    if config.adaptive is not None and (judge.name, ref.sample) not in first_round(config):
        cells = dimensions if config.mode == "combined" else (ref.dimension,)
        if not any(
            is_escalated(runtime.sessions, CellRef(ref.batch_id, item.id, d)) for d in cells
        ):
            raise refused(what, "a second-round sample of a cell that was not escalated", named)
    if config.candidates and not _outputs_written(config, item):
        raise refused(what, f"item {shown(item.id)}'s candidates have not all answered yet", named)


def _outputs_written(config: BatchConfig, item: Item) -> bool:
    if config.pairwise is not None:
        return item.output_a is not None and item.output_b is not None
    return item.output is not None


def check_judged(
    config: BatchConfig, ref: SampleRef, spec: CallSpec, samples: Sequence[CellSample]
) -> None:
    """MessageRefused unless the samples a message carries are the task's own (one per
    dimension its call scores, of its judge and sample index) and each could be true."""
    what, named = "judge task", tuple(ref)
    dimensions = [s.dimension for s in samples]
    if sorted(dimensions) != sorted(spec.dimensions):
        raise refused(
            what,
            f"it carries samples of {shown(dimensions)}; its call scores "
            f"{shown(list(spec.dimensions))}",
            named,
        )
    for s in samples:
        if (s.result.judge, s.result.sample) != (ref.judge, ref.sample):
            raise refused(
                what, f"it carries a sample of {shown(s.result.judge)} #{s.result.sample}", named
            )
        problem = sample_problem(config, config.dimension(s.dimension), s.result, s.pair)
        if problem:
            raise refused(what, f"a carried sample's {problem}", named)


def check_cell(runtime: WorkerRuntime, cell: CellRef) -> MessageRefused | None:
    """Why a cell callback's cell is not one of its batch's, if it is not."""
    try:
        config, item = stored_parts(runtime, cell.batch_id, cell.item_id, "cell callback")
    except MessageRefused as exc:
        return exc
    problem = dimension_problem(config, item, cell.dimension)
    return refused("cell callback", problem, tuple(cell)) if problem else None


def check_generation(
    runtime: WorkerRuntime, ref: GenerationRef
) -> tuple[BatchConfig, LLMCandidate | HTTPCandidate]:
    """The batch's config and the candidate a generation task names; MessageRefused when the
    batch is not there or has no such candidate (its input item is looked up when it is
    read, which says so in turn)."""
    what = "generation task"
    try:
        config = runtime.config(ref.batch_id)
    except UnknownBatchError as exc:
        raise refused(what, str(exc), tuple(ref)) from None
    for candidate in config.candidates:
        if candidate.name == ref.candidate:
            return config, candidate
    raise refused(what, f"batch has no candidate {shown(ref.candidate)}", tuple(ref))
