"""A calibration file: each judge's fitted map from its scores to people's labels, per
dimension, and the panel weights that came out of the fit (`jury agreement BATCH
--save-calibration calib.json`). A later batch names it (`calibration: calib.json`); its
records then carry calibrated scores beside the raw ones, computed when they are read.

The calibrated final score is the weighted mean of the calibrated scores of the judges that
scored, each weighing the inverse of its held-out squared error (its fitted `weight`), so a
judge that tracks people closely counts more, read through the panel's own map: each judge's
map pulls its scores towards the labels' mean by as much as the judge is unreliable, and a
mean of such scores would be pulled twice; the panel map, fitted to the judges' held-out
calibrated scores, undoes that. Judges or dimensions the file does not know take no part.
The file and the record part only: fitting and applying the maps is jury.analysis.calibration.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

CalibrationMethod = Literal["identity", "isotonic", "platt"]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FittedMap(_Frozen):
    """One judge's (or the panel's) map on one dimension, chosen by cross-validation."""

    method: CalibrationMethod
    # isotonic: the fitted (score, label) points, read by linear interpolation between them
    points: list[tuple[float, float]] = Field(default_factory=list)
    # platt: label ≈ low + (high − low)·σ(a·score + b)
    a: float | None = None
    b: float | None = None
    weight: float = Field(default=1.0, gt=0)
    n_items: int = Field(default=0, ge=0)
    # held-out mean absolute error against the labels, per method (identity: the raw scores)
    held_out_mae: dict[str, float] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _complete(self) -> FittedMap:
        if self.method == "isotonic":
            if not self.points:
                raise ValueError("an isotonic map needs its points")
            xs = [x for x, _ in self.points]
            if xs != sorted(set(xs)):
                raise ValueError("isotonic points must have increasing scores")
        if self.method == "platt" and (self.a is None or self.b is None):
            raise ValueError("a Platt map needs its coefficients a and b")
        return self


class DimensionCalibration(_Frozen):
    low: float
    high: float
    judges: dict[str, FittedMap]
    panel: FittedMap | None = None  # applied to the weighted mean of the calibrated scores


class FittedOn(_Frozen):
    batch_id: str
    name: str
    n_labelled: int


class Calibration(_Frozen):
    """The file's content (JSON)."""

    format: Literal["jury-calibration"] = "jury-calibration"
    version: Literal[1] = 1
    fitted_on: FittedOn | None = None
    folds: int = 5
    seed: int = 0
    dimensions: dict[str, DimensionCalibration]


class CalibratedScores(BaseModel):
    """The `calibrated` part of a result record (batches that name a calibration file)."""

    final_score: float | None  # None: no judge the file knows scored
    passed: bool | None
    judges: dict[str, float]  # each known judge's calibrated aggregated score
