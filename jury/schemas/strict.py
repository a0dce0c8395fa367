"""The strict base of every batch-file model, its limits on names and numbers, and the check
that numbers are finite. Pure."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict

MAX_NAME_CHARS = 100
# Text a batch file writes for the judges: a criterion's rubric, and prompt templates and
# system prompts. Fixed bounds, far above any useful text, so that a 20 MB description is
# refused when loaded instead of being sent in every prompt (docs/limits-and-security.md).
MAX_DESCRIPTION_CHARS = 20_000
MAX_PROMPT_CHARS = 100_000
# A URL or an environment variable's name that a batch file gives.
MAX_URL_CHARS = 2_000
# Numbers a batch gives are finite (no .inf or NaN) and at most this large in magnitude, so
# that sums of squares over a million verdicts stay finite too.
MAX_MAGNITUDE = 1e6


class StrictModel(BaseModel):
    """Unknown fields are errors (a typo in `temprature` must not fall back to a default);
    validated models are frozen; NaN and infinity are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def repeated(values: Iterable[Hashable]) -> list[Any]:
    """The values that appear more than once, sorted (in linear time: a list of 100,000
    names is counted once, not once per name)."""
    return sorted(v for v, n in Counter(values).items() if n > 1)


def non_finite_path(value: Any, path: str = "") -> str | None:
    """Where in a JSON-like value a NaN or an infinity sits (`.a[2]`), or None. The value's
    depth is bounded by the document limits before it gets here."""
    if isinstance(value, float) and not math.isfinite(value):
        return path
    if isinstance(value, dict):
        items: Any = ((f".{k}", v) for k, v in value.items())
    elif isinstance(value, list | tuple):
        items = ((f"[{n}]", v) for n, v in enumerate(value))
    else:
        return None
    for key, child in items:
        found = non_finite_path(child, path + key)
        if found is not None:
            return found
    return None
