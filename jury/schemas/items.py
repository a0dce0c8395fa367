"""One item of a batch: what is judged, with what people said of it. Pure."""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from jury.schemas.identifiers import checked_identifier
from jury.schemas.pairwise import Winner
from jury.schemas.strict import MAX_DESCRIPTION_CHARS, StrictModel, non_finite_path

MAX_ITEM_ID_CHARS = 200
MAX_ITEM_CRITERIA = 50


class ItemCriterion(StrictModel):
    """A criterion of one item's own (the plan's `custom_criteria` entry): its rubric, and
    optionally its scale and pass threshold (else the batch's). `name` is the plan's display
    label ("CUSTOM (1-5)"); the criterion is named by its key."""

    name: str | None = Field(default=None, max_length=200)
    # Its rubric (`name: description`) is a dimension's description, within that bound.
    description: str = Field(min_length=1, max_length=MAX_DESCRIPTION_CHARS - 202)
    scale: dict[str, float] | None = None
    threshold: float | None = None

    @property
    def rubric(self) -> str:
        return f"{self.name}: {self.description}" if self.name else self.description


class Item(StrictModel):
    """One thing to judge: `output`, or in a pairwise batch the two outputs `output_a` and
    `output_b` to compare. Loading validates with context {"pairwise": bool} (the batch's
    mode); without context, as when a worker reads a stored item, either shape is accepted."""

    id: str = Field(min_length=1, max_length=MAX_ITEM_ID_CHARS)
    # Declared before `output`, whose validator reads them.
    output_a: str | None = Field(default=None, validate_default=True)
    output_b: str | None = Field(default=None, validate_default=True)
    output: str | None = Field(default=None, validate_default=True)
    input: str | None = None
    reference: str | None = None
    context: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    # The criteria this item is judged on (schemas.item_dimensions): names of the batch's
    # dimensions, of built-in criteria or of its own `custom_criteria`; empty: the batch's.
    focus_areas: list[str] = Field(default_factory=list, max_length=MAX_ITEM_CRITERIA)
    prompt_hint: str | None = None
    custom_criteria: dict[str, ItemCriterion] = Field(
        default_factory=dict, max_length=MAX_ITEM_CRITERIA
    )
    # What people said (never shown to a judge): a score per dimension, or in a pairwise batch
    # the side they preferred, per dimension (`labels`) or for every dimension (`label`).
    labels: dict[str, float | Winner] = Field(default_factory=dict)
    label: Winner | None = None

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls, value: Any) -> Any:
        # Numeric ids are common in JSONL exports; they mean the same as their text.
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("id")
    @classmethod
    def _id_is_identifier(cls, value: str) -> str:
        return checked_identifier(value, "item id")

    @field_validator("metadata")
    @classmethod
    def _metadata_is_finite(cls, value: dict[str, Any]) -> dict[str, Any]:
        where = non_finite_path(value)
        if where is not None:
            raise ValueError(f"metadata{where} is not a finite number (NaN or infinity)")
        return value

    @field_validator("output_a", "output_b")
    @classmethod
    def _pair_outputs(cls, value: str | None, info: ValidationInfo) -> str | None:
        if (info.context or {}).get("generated"):
            return _not_given(value)
        pairwise = (info.context or {}).get("pairwise")
        if pairwise is True and value is None:
            raise PydanticCustomError(
                "missing", "Field required (a pairwise batch compares output_a with output_b)"
            )
        if pairwise is False and value is not None:
            raise PydanticCustomError(
                "not_pairwise",
                "only a pairwise batch compares output_a with output_b: add a `pairwise:` "
                "section to the batch file, or give the item one `output`",
            )
        return value

    @field_validator("output")
    @classmethod
    def _single_output(cls, value: str | None, info: ValidationInfo) -> str | None:
        if (info.context or {}).get("generated"):
            return _not_given(value)
        pairwise = (info.context or {}).get("pairwise")
        if pairwise is True:
            if value is not None:
                raise PydanticCustomError(
                    "pairwise_output",
                    "a pairwise item has output_a and output_b to compare, not output",
                )
            return value
        is_pair = info.data.get("output_a") is not None and info.data.get("output_b") is not None
        if value is None and not (pairwise is None and is_pair):
            raise PydanticCustomError("missing", "Field required")
        return value

    @field_validator("labels", mode="before")
    @classmethod
    def _labels_are_values(cls, value: Any) -> Any:
        if isinstance(value, dict):
            for name, label in value.items():
                if isinstance(label, bool) or (
                    isinstance(label, float) and not math.isfinite(label)
                ):
                    raise PydanticCustomError(
                        "label", f"the label of {name!r} must be a number (or A, B, tie)"
                    )
        return value

    @model_validator(mode="after")
    def _labels_fit_mode(self, info: ValidationInfo) -> Item:
        if (info.context or {}).get("generated") and self.input is None:
            raise ValueError("the batch's candidates answer each item's `input`: give one")
        pairwise = (info.context or {}).get("pairwise")
        sides = {k for k, v in self.labels.items() if isinstance(v, str)}
        if pairwise is True and len(sides) < len(self.labels):
            raise ValueError("a pairwise item's labels name the side people preferred: A, B or tie")
        if pairwise is False and (sides or self.label is not None):
            raise ValueError(
                "only a pairwise item has a preferred side (label: A | B | tie); give this "
                "item a score per dimension, `labels: {dimension: score}`"
            )
        return self

    @property
    def is_pair(self) -> bool:
        return self.output_a is not None and self.output_b is not None

    def label_for(self, dimension: str) -> float | Winner | None:
        """People's label of this item on one dimension, if they gave one."""
        found = self.labels.get(dimension)
        return self.label if found is None else found


def _not_given(value: str | None) -> str | None:
    """In a batch with `candidates:` (context {"generated": True}) the outputs are written
    by the candidates, never by the item."""
    if value is not None:
        raise PydanticCustomError(
            "generated_output",
            "the batch's candidates write the outputs: an item gives only its `input`",
        )
    return value
