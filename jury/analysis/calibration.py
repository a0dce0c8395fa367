"""Fitting a calibration file (schemas.calibration) to a batch's labelled records.

For each dimension and judge: isotonic regression and Platt scaling are fitted and measured
by k-fold cross-validation against leaving the scores as they are; the method with the
lowest held-out mean absolute error is fitted again on every labelled item and kept. Folds
are drawn per item (a hash of its id and the seed), so all judges are tested on the same
held-out items. A judge's panel weight is the inverse of its held-out mean squared error,
scaled so that the weights of a dimension average 1: the judge that tracks people closest
counts most (inverse-variance weighting, which assumes the judges' errors independent; read
the effective number of judges before trusting it). Last, the panel's map is chosen the same
way on the weighted mean of the judges' held-out calibrated scores.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence

from jury.schemas.calibration import (
    CalibratedScores,
    Calibration,
    DimensionCalibration,
    FittedMap,
    FittedOn,
)
from jury.schemas.trust_records import DimensionRecords, TrustRecords
from jury.stats.calibration import (
    CrossValidation,
    IsotonicFit,
    PlattFit,
    cross_validate,
    fit_method,
    identity,
)

DEFAULT_FOLDS = 5
MIN_LABELLED = 10  # fewer labelled items than this leave a judge uncalibrated
_SMALLEST_ERROR = 1e-6


def fitted_mapping(fitted: FittedMap, low: float, high: float) -> Callable[[float], float]:
    """The map a calibration file describes, as a function of a score on [low, high]."""
    if fitted.method == "isotonic":
        return IsotonicFit(tuple(x for x, _ in fitted.points), tuple(y for _, y in fitted.points))
    if fitted.method == "platt":
        assert fitted.a is not None and fitted.b is not None  # FittedMap validates it
        return PlattFit(fitted.a, fitted.b, low, high)
    return identity


def calibrate_scores(
    calibration: Calibration, dimension: str, scores: Mapping[str, float], threshold: float
) -> CalibratedScores | None:
    """Calibrated scores of one record from its judges' raw aggregated scores; None when the
    file does not know the dimension."""
    fitted = calibration.dimensions.get(dimension)
    if fitted is None:
        return None
    calibrated: dict[str, float] = {}
    weights: dict[str, float] = {}
    for judge, score in scores.items():
        known = fitted.judges.get(judge)
        if known is None or not math.isfinite(score):
            continue
        calibrated[judge] = fitted_mapping(known, fitted.low, fitted.high)(score)
        weights[judge] = known.weight
    if not calibrated:
        return CalibratedScores(final_score=None, passed=None, judges={})
    total = sum(weights.values())
    final = math.fsum(calibrated[j] * weights[j] for j in calibrated) / total
    if fitted.panel is not None:
        final = fitted_mapping(fitted.panel, fitted.low, fitted.high)(final)
    return CalibratedScores(final_score=final, passed=final >= threshold, judges=calibrated)


def fold_of(item_id: str, folds: int, seed: int) -> int:
    digest = hashlib.blake2b(f"{seed}:{item_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % folds


def _fitted_map(
    validation: CrossValidation,
    scores: Sequence[float],
    labels: Sequence[float],
    low: float,
    high: float,
) -> FittedMap:
    """The winning method fitted on every item, with its cross-validation figures."""
    mapping = fit_method(validation.best, scores, labels, low, high)
    return FittedMap(
        method=validation.best,
        points=(
            list(zip(mapping.xs, mapping.ys, strict=True))
            if isinstance(mapping, IsotonicFit)
            else []
        ),
        a=mapping.a if isinstance(mapping, PlattFit) else None,
        b=mapping.b if isinstance(mapping, PlattFit) else None,
        n_items=len(scores),
        held_out_mae={m: round(e, 6) for m, e in validation.errors.items()},
    )


def _dimension_calibration(
    dimension: DimensionRecords, low: float, high: float, folds: int, seed: int
) -> DimensionCalibration | None:
    records = dimension.labelled
    labels = [r.score_label for r in records]
    item_folds = [fold_of(r.item_id, folds, seed) for r in records]
    fitted: dict[str, FittedMap] = {}
    inverse_errors: dict[str, float] = {}
    held_out: dict[str, list[float | None]] = {}
    for judge in dimension.judges:
        rows = [
            i
            for i, score in enumerate(dimension.values(judge))
            if score is not None and labels[i] is not None
        ]
        if len(rows) < MIN_LABELLED:
            continue
        scores = [dimension.values(judge)[i] or 0.0 for i in rows]
        truths = [labels[i] or 0.0 for i in rows]
        validation = cross_validate(scores, truths, [item_folds[i] for i in rows], low, high)
        fitted[judge] = _fitted_map(validation, scores, truths, low, high)
        inverse_errors[judge] = 1.0 / max(
            validation.squared_errors[validation.best], _SMALLEST_ERROR
        )
        column: list[float | None] = [None] * len(records)
        for i, prediction in zip(rows, validation.held_out, strict=True):
            column[i] = prediction
        held_out[judge] = column
    if not fitted:
        return None
    mean = sum(inverse_errors.values()) / len(inverse_errors)
    weights = {judge: value / mean for judge, value in inverse_errors.items()}
    judges = {j: m.model_copy(update={"weight": weights[j]}) for j, m in fitted.items()}
    # The panel's map, on the weighted mean of the held-out calibrated scores.
    pooled: list[tuple[float, float, int]] = []
    for i, label in enumerate(labels):
        present = {j: column[i] for j, column in held_out.items() if column[i] is not None}
        if present and label is not None:
            total = sum(weights[j] for j in present)
            mean_score = sum((v or 0.0) * weights[j] for j, v in present.items()) / total
            pooled.append((mean_score, label, item_folds[i]))
    panel = None
    if len(pooled) >= MIN_LABELLED:
        xs, ys = [x for x, _, _ in pooled], [y for _, y, _ in pooled]
        validation = cross_validate(xs, ys, [f for _, _, f in pooled], low, high)
        panel = _fitted_map(validation, xs, ys, low, high)
    return DimensionCalibration(low=low, high=high, judges=judges, panel=panel)


def fit_calibration(
    records: TrustRecords,
    scales: Mapping[str, tuple[float, float]],
    *,
    folds: int = DEFAULT_FOLDS,
    seed: int = 0,
    fitted_on: FittedOn | None = None,
) -> Calibration:
    """Each judge's map per dimension (scored dimensions with labels, in `scales`)."""
    if folds < 2:
        raise ValueError("cross-validation needs two folds or more")
    dimensions: dict[str, DimensionCalibration] = {}
    for name, dimension in records.dimensions.items():
        if dimension.kind != "scores" or name not in scales or not dimension.labelled:
            continue
        fitted = _dimension_calibration(dimension, *scales[name], folds, seed)
        if fitted is not None:
            dimensions[name] = fitted
    return Calibration(fitted_on=fitted_on, folds=folds, seed=seed, dimensions=dimensions)
