"""Reading a batch's result records with what people said and what calibration makes of them.

Records are stored as judged. When they are read, a record whose item carries people's
label for its dimension gets it (`human_label`), and in a batch that names a calibration
file its calibrated scores beside the raw ones (`calibrated`): computed here, from the stored
raw scores and the calibration captured in the batch's config, so judging needs no change and
a record is never stored twice.
"""

from __future__ import annotations

from collections.abc import Iterator

from jury.analysis.calibration import calibrate_scores
from jury.schemas.batch import BatchConfig, Item
from jury.schemas.calibration import Calibration
from jury.schemas.results import Verdict
from jury.stats.panel import preference_side_by_side, side_by_side
from jury.store.cells import iter_verdicts
from jury.store.labels import item_labels
from jury.store.repository import load_config
from jury.store.sql import Sessions


def with_trust_parts(
    verdict: Verdict, labelled: Item | None, calibration: Calibration | None
) -> Verdict:
    """The record with its item's label on its dimension and its calibrated scores."""
    update: dict[str, object] = {}
    if labelled is not None:
        label = labelled.label_for(verdict.criterion_id)
        if label is not None:
            update["human_label"] = label
    if calibration is not None:
        scores = {
            judge: e.aggregated_score
            for judge, e in verdict.llm_evaluations.items()
            if e.aggregated_score is not None
        }
        calibrated = calibrate_scores(calibration, verdict.criterion_id, scores, verdict.threshold)
        if calibrated is not None:
            update["calibrated"] = calibrated
    return verdict.model_copy(update=update) if update else verdict


def with_aggregations(verdict: Verdict, config: BatchConfig) -> Verdict:
    """The record with the panel's score by each method the batch reports side by side,
    from the judges' stored within-model scores (the same registry as final_score)."""
    methods = config.aggregation.reported_methods
    if not methods:
        return verdict
    scores = {
        judge: e.aggregated_score
        for judge, e in verdict.llm_evaluations.items()
        if e.aggregated_score is not None
    }
    weights = {j.name: j.weight for j in config.judges}
    sides = verdict.pairwise.judge_scores if verdict.pairwise is not None else None
    if sides is not None:
        # A pairwise record's preference by each method is A − B of the method over each
        # side, as its final_score is (not the method over the judges' preferences).
        found = preference_side_by_side(sides, weights, methods)
    else:
        found = side_by_side(scores, weights, methods)
    return verdict.model_copy(update={"aggregations": found})


def read_records(
    sessions: Sessions, batch_id: str, config: BatchConfig | None = None
) -> Iterator[Verdict]:
    """The batch's records in item then dimension order, with labels, calibrated scores and
    the side-by-side aggregations; without their uncertainty when the batch says
    `report_uncertainty: false`."""
    config = config or load_config(sessions, batch_id)
    labels = item_labels(sessions, batch_id) if config.has_labels else {}
    calibration = config.resolved_calibration
    side = bool(config.aggregation.reported_methods)
    hidden = {} if config.aggregation.report_uncertainty else {"uncertainty_shown": False}
    if not labels and calibration is None and not side and not hidden:
        yield from iter_verdicts(sessions, batch_id)
        return
    for verdict in iter_verdicts(sessions, batch_id):
        verdict = with_trust_parts(verdict, labels.get(verdict.item_id), calibration)
        verdict = verdict.model_copy(update=hidden) if hidden else verdict
        yield with_aggregations(verdict, config) if side else verdict
