"""The size of a batch, bounded before it is expanded: judges and dimensions counted in the
parsed document before any is validated, and the samples a batch asks for counted as its items
are read (JURY_MAX_JUDGES, JURY_MAX_DIMENSIONS, JURY_MAX_BATCH_SAMPLES in schemas.limits).
A panel of 100,000 judges with `n: 100` is refused in milliseconds, not planned for minutes."""

from __future__ import annotations

from typing import Any

from jury.schemas.limits import InputLimits


def _raise_with(field: str) -> str:
    return f"raise it with {InputLimits.env_name(field)}, or split the batch"


def document_size_problems(data: dict[str, Any], limits: InputLimits) -> list[str]:
    """The batch document's lists of judges, candidates and dimensions, counted as parsed."""
    problems = []
    for key, field in (
        ("judges", "max_judges"),
        ("candidates", "max_judges"),
        ("dimensions", "max_dimensions"),
    ):
        value = data.get(key)
        limit = getattr(limits, field)
        if isinstance(value, list) and len(value) > limit:
            problems.append(
                f"{key}: {len(value):,} entries, over the limit of {limit:,} ({_raise_with(field)})"
            )
    return problems


def samples_problem(cells: int, samples_per_cell: int, limits: InputLimits) -> str | None:
    """Why `cells` verdicts of `samples_per_cell` samples each are too many, or None."""
    samples = cells * samples_per_cell
    if samples <= limits.max_batch_samples:
        return None
    return (
        f"the batch asks for over {limits.max_batch_samples:,} judge samples ({cells:,} "
        f"verdicts so far, each of {samples_per_cell:,} samples from the panel's `n`), and "
        f"its items were read no further ({_raise_with('max_batch_samples')})"
    )


def dimensions_problem(count: int, limits: InputLimits) -> str | None:
    """Why a batch judged on `count` criteria (its own and its items') has too many."""
    if count <= limits.max_dimensions:
        return None
    return (
        f"the batch and its items name over {limits.max_dimensions:,} criteria, and its "
        f"items were read no further ({_raise_with('max_dimensions')})"
    )
