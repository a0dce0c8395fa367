"""The batch file: the judge panel, the dimensions, the aggregation rules and the items.

Everything here is validated before anything is enqueued. Unknown fields are errors (a typo in
`temprature` must not silently fall back to a default). The judge config of the original plan
(`judges: [{provider, enabled, n}]`, top-level `temperature`, `consensus_threshold`, …) is
accepted as-is and mapped onto the same models.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from jury.schemas.adaptive import Adaptive
from jury.schemas.calibration import Calibration
from jury.schemas.candidates import (
    Candidate,
    candidates_as_pair,
    candidates_problem,
    parse_candidate,
)
from jury.schemas.criteria import builtin_criterion, criterion_name_problem, rubric_on_scale
from jury.schemas.identifiers import checked_identifier
from jury.schemas.items import MAX_ITEM_ID_CHARS as MAX_ITEM_ID_CHARS
from jury.schemas.items import Item as Item
from jury.schemas.judge import DEFAULT_TEMPERATURE as DEFAULT_TEMPERATURE
from jury.schemas.judge import PROVIDER_DEFAULT_MODELS as PROVIDER_DEFAULT_MODELS
from jury.schemas.judge import Judge as Judge
from jury.schemas.judge_prompts import batch_prompt_problem
from jury.schemas.pairwise import PairwiseSettings
from jury.schemas.strict import MAX_DESCRIPTION_CHARS, MAX_PROMPT_CHARS, repeated
from jury.schemas.strict import MAX_MAGNITUDE as MAX_MAGNITUDE
from jury.schemas.strict import MAX_NAME_CHARS as MAX_NAME_CHARS
from jury.schemas.strict import StrictModel as _Strict
from jury.schemas.strict import non_finite_path as non_finite_path


class Scale(_Strict):
    min: float = Field(default=1, ge=-MAX_MAGNITUDE, le=MAX_MAGNITUDE)
    max: float = Field(default=5, ge=-MAX_MAGNITUDE, le=MAX_MAGNITUDE)

    @model_validator(mode="after")
    def _ordered(self) -> Scale:
        if self.min >= self.max:
            raise ValueError(f"scale min ({self.min:g}) must be below max ({self.max:g})")
        return self

    def contains(self, value: float) -> bool:
        return self.min <= value <= self.max


class Dimension(_Strict):
    """A criterion to judge: built-in (by name) or custom (with a description)."""

    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    description: str | None = Field(default=None, max_length=MAX_DESCRIPTION_CHARS)
    scale: Scale | None = None
    threshold: float | None = Field(default=None, ge=-MAX_MAGNITUDE, le=MAX_MAGNITUDE)
    # Judged only on the items that name it in their `focus_areas` (an item's own criterion,
    # or a built-in one an item chose, are added so by loading: schemas.item_dimensions).
    item_only: bool = False

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, data: Any) -> Any:
        return {"name": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _resolve(self) -> Dimension:
        problem = criterion_name_problem(self.name)
        if problem:
            raise ValueError(problem)
        builtin = builtin_criterion(self.name)
        if builtin is None and not self.description:
            raise ValueError(
                f"unknown criterion {self.name!r}: it is not built-in, so it needs a description"
            )
        # Fill in the built-in defaults so that every stored dimension is self-contained.
        if builtin is not None:
            if self.scale is None:
                object.__setattr__(
                    self, "scale", Scale(min=builtin.scale_min, max=builtin.scale_max)
                )
            assert self.scale is not None
            if self.description is None:
                rubric = rubric_on_scale(builtin, self.scale.min, self.scale.max)
                object.__setattr__(self, "description", rubric)
            if self.threshold is None:
                # The built-in threshold sits at the same relative height on any scale.
                assert self.scale is not None
                relative = (builtin.threshold - builtin.scale_min) / (
                    builtin.scale_max - builtin.scale_min
                )
                threshold = self.scale.min + relative * (self.scale.max - self.scale.min)
                object.__setattr__(self, "threshold", threshold)
        if self.scale is None:
            object.__setattr__(self, "scale", Scale())
        assert self.scale is not None
        if self.threshold is None:
            object.__setattr__(self, "threshold", (self.scale.min + self.scale.max) / 2)
        assert self.threshold is not None
        if not self.scale.contains(self.threshold):
            raise ValueError(
                f"threshold {self.threshold:g} of {self.name!r} lies outside its scale "
                f"{self.scale.min:g}..{self.scale.max:g}"
            )
        return self

    @property
    def resolved_scale(self) -> Scale:
        assert self.scale is not None
        return self.scale

    @property
    def resolved_threshold(self) -> float:
        assert self.threshold is not None
        return self.threshold


WithinModelMethod = Literal["mean", "median"]
# `majority_vote` decides pass/fail by the judges' votes (each judge's own score against the
# threshold, weighted by its `weight`); its final_score is the weighted mean, for reading.
# `trimmed_mean` and `geometric_median` resist a judge failing in a biased way (jury.stats.robust).
AcrossModelsMethod = Literal[
    "mean",
    "median",
    "min",
    "max",
    "weighted_mean",
    "majority_vote",
    "trimmed_mean",
    "geometric_median",
]

# The methods that give a score (majority_vote decides pass/fail; its score is weighted_mean).
ScoreMethod = Literal[
    "mean", "median", "min", "max", "weighted_mean", "trimmed_mean", "geometric_median"
]

JudgingMode = Literal["per_dimension", "combined"]


class Aggregation(_Strict):
    """How a cell's samples become a verdict: within each judge, then across the judges."""

    within_model: WithinModelMethod = "mean"
    across_models: AcrossModelsMethod = "mean"
    consensus_threshold: float = Field(default=1.5, gt=0, le=MAX_MAGNITUDE)
    flag_low_consensus: bool = True
    report_uncertainty: bool = True
    # More cross-judge methods reported beside `across_models` (uqlm's avg, max, min and
    # median side by side): each record's `aggregations`, a column each in csv.
    also_across_models: list[ScoreMethod] = Field(default_factory=list, max_length=8)

    @field_validator("also_across_models")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        dupes = repeated(value)
        if dupes:
            raise ValueError(f"{dupes} appear twice")
        return value

    @property
    def reported_methods(self) -> list[str]:
        """The methods whose scores each record shows side by side: the main one first
        (its score is `final_score`), then the others; empty when none was asked for."""
        if not self.also_across_models:
            return []
        others = [m for m in self.also_across_models if m != self.across_models]
        return [self.across_models, *others]


class BatchConfig(_Strict):
    """The batch file minus its items (which are streamed separately)."""

    name: str = Field(default="batch", min_length=1, max_length=200)
    judges: list[Judge] = Field(min_length=1)
    dimensions: list[Dimension] = Field(min_length=1)
    aggregation: Aggregation = Aggregation()
    max_item_chars: int = Field(default=1_000_000, gt=0, le=1_000_000_000)
    # Stop taking new judge calls once the recorded cost reaches this many US dollars.
    max_cost_usd: float | None = Field(default=None, gt=0, le=1e9)
    # Reuse a judge's stored answer to the very same call (model, endpoint, prompt,
    # temperature, sample index), and store new ones: a re-run costs nothing (worker.cache).
    cache: bool = True
    # per_dimension: one call per (item, dimension, judge, sample); combined: one call per
    # (item, judge, sample) scores every dimension at once.
    mode: JudgingMode = "per_dimension"
    # Present: compare output_a with output_b of each item (schemas.pairwise).
    pairwise: PairwiseSettings | None = None
    # Present: a cheaper first round per cell, the rest where it is uncertain (schemas.adaptive).
    adaptive: Adaptive | None = None
    # How long a judge task may wait in all for rate-limit and in-flight slots before its
    # sample is stored as failed (`wait_limit`); unset: it waits as long as it takes.
    max_wait_s: float | None = Field(default=None, gt=0)
    # Present: each judge's fitted map to people's labels (schemas.calibration). The batch file
    # names a file; loading reads it into the stored config, so reading records needs no file.
    calibration: Calibration | str | None = None
    # Set when the batch was loaded and some item carries people's labels: only then are the
    # labels read back beside the records (store.labels), which costs a pass over the items.
    has_labels: bool = False
    # Set when the batch was loaded and some item chose its own criteria (`focus_areas`,
    # `custom_criteria`): only then does a cell count need the items (schemas.item_dimensions).
    per_item_dimensions: bool = False
    # Judges also vote pass/fail (the plan's test_pass); a prompt template (schemas.judge_prompts)
    pass_vote: bool = False
    prompt_template: str | None = Field(default=None, max_length=MAX_PROMPT_CHARS)
    # Present: the outputs are generated by these (schemas.candidates), and items need only an
    # `input`; two candidates make the batch pairwise, their names naming the sides.
    candidates: list[Candidate] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _name_is_identifier(cls, value: str) -> str:
        return checked_identifier(value, "batch name")

    @field_validator("pairwise", mode="before")
    @classmethod
    def _pairwise_switch(cls, value: Any) -> Any:
        # `pairwise: true` turns it on with the defaults; `false` leaves it off.
        if value is True:
            return {}
        return None if value is False else value

    @field_validator("candidates", mode="before")
    @classmethod
    def _candidate_kinds(cls, value: Any) -> Any:
        return [parse_candidate(c) for c in value] if isinstance(value, list) else value

    @model_validator(mode="before")
    @classmethod
    def _two_candidates_are_a_pair(cls, data: Any) -> Any:
        return candidates_as_pair(data)

    @model_validator(mode="before")
    @classmethod
    def _accept_plan_shape(cls, data: Any) -> Any:
        """Map the original plan's top-level keys onto judges and aggregation."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        temperature = data.pop("temperature", None)
        if temperature is not None and isinstance(data.get("judges"), list):
            judges = [{"model": j} if isinstance(j, str) else j for j in data["judges"]]
            data["judges"] = [
                {**j, "temperature": j.get("temperature", temperature)}
                if isinstance(j, dict)
                else j
                for j in judges
            ]
        moved = {
            k: data.pop(k)
            for k in ("consensus_threshold", "flag_low_consensus", "report_uncertainty")
            if k in data
        }
        if moved:
            aggregation = data.get("aggregation") or {}
            if isinstance(aggregation, dict):
                data["aggregation"] = {**moved, **aggregation}
        return data

    @model_validator(mode="after")
    def _check_panel(self) -> BatchConfig:
        names = [j.name for j in self.judges]
        dupes = repeated(names)
        if dupes:
            raise ValueError(
                f"judge names must be unique, {dupes} appear twice: give each a distinct `name`"
            )
        if not any(j.enabled for j in self.judges):
            raise ValueError("the panel has no enabled judge")
        if self.pairwise is not None and self.aggregation.across_models == "majority_vote":
            raise ValueError(
                "aggregation.across_models: majority_vote votes pass/fail against a threshold, "
                "which a pairwise batch does not have (its verdict is a winner); use mean, "
                "median, weighted_mean, min or max"
            )
        self._check_adaptive()
        self._check_candidates()
        if self.calibration is not None and self.pairwise is not None:
            raise ValueError(
                "calibration: maps scores to people's scores; a pairwise batch's labels are "
                "preferred sides, which it does not calibrate"
            )
        dims = [d.name for d in self.dimensions]
        dupes = repeated(dims)
        if dupes:
            raise ValueError(f"dimension names must be unique, {dupes} appear twice")
        problem = batch_prompt_problem(self)
        if problem:
            raise ValueError(problem)
        return self

    def _check_candidates(self) -> None:
        problem = candidates_problem([c.name for c in self.candidates], self.pairwise is not None)
        if problem:
            raise ValueError(f"candidates: {problem}")

    def _check_adaptive(self) -> None:
        reserve = [j.name for j in self.panel if j.reserve]
        if self.adaptive is None:
            if reserve:
                raise ValueError(
                    f"judges {reserve} are `reserve: true`, which only an `adaptive:` batch uses"
                )
            return
        if len(reserve) == len(self.panel):
            raise ValueError("adaptive: every judge is a reserve judge; the first round has none")

    @property
    def panel(self) -> list[Judge]:
        """The enabled judges, in file order."""
        return [j for j in self.judges if j.enabled]

    def judge(self, name: str) -> Judge:
        for j in self.judges:
            if j.name == name:
                return j
        raise KeyError(name)

    def dimension(self, name: str) -> Dimension:
        for d in self.dimensions:
            if d.name == name:
                return d
        raise KeyError(name)

    @property
    def default_dimensions(self) -> list[Dimension]:
        """What an item that chooses no criteria of its own is judged on."""
        return [d for d in self.dimensions if not d.item_only]

    @property
    def samples_per_cell(self) -> int:
        return sum(j.n for j in self.panel)

    @property
    def resolved_calibration(self) -> Calibration | None:
        """The calibration read from the file (None until loading has read it, or without)."""
        return self.calibration if isinstance(self.calibration, Calibration) else None
