"""What a judge is asked and how its answer maps to the criterion's scale. Pure.

- The pass vote (the multi-LLM judge plan's `test_pass`): with `pass_vote: true` every judge
  says pass or fail beside its score; a record reports the share of samples that passed.
- Scoring templates (uqlm's LLMPanel): `likert` asks for a score on the criterion's scale;
  `true_false_uncertain` for true, false or uncertain (1, 0, 0.5); `continuous` for 0 to 100.
  Each answer is normalised to the criterion's scale (min + x·(max−min)), so judges with
  different templates aggregate together.
- Prompt templates: a batch's (or a judge's) own wording, with named placeholders that jury
  fills in: the criterion's `{criterion}`, `{rubric}`, `{scale}`, and the item's `{input}`,
  `{output}`, `{reference}`, `{context}`, `{metadata.KEY}`, each item value fenced as data.
  `{{` and `}}` write a literal brace.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

ScoringTemplate = Literal["likert", "true_false_uncertain", "continuous"]
SCORING_TEMPLATES: tuple[str, ...] = ("likert", "true_false_uncertain", "continuous")

# What true, false and uncertain mean, as a fraction of the criterion's scale.
TRUE_FALSE_UNCERTAIN: dict[str, float] = {"true": 1.0, "false": 0.0, "uncertain": 0.5}
CONTINUOUS_MAX = 100.0

CRITERION_FIELDS = ("criterion", "rubric", "scale")
ITEM_FIELDS = ("input", "output", "reference", "context")
MAX_TEMPLATE_CHARS = 20_000
# One placeholder: `{name}` or `{metadata.key}`; `{{` and `}}` are literal braces.
PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
_METADATA_KEY = re.compile(r"metadata\.([A-Za-z0-9_-]{1,100})")


def normalised(scoring: str, value: float, low: float, high: float) -> float:
    """A template's answer (a fraction for true/false/uncertain, 0–100 for continuous, a
    score for likert) on the criterion's scale [low, high]."""
    if scoring == "likert":
        return value
    fraction = value / CONTINUOUS_MAX if scoring == "continuous" else value
    return low + fraction * (high - low)


def template_placeholders(template: str) -> list[str]:
    """The placeholder names a template uses, in order (literal braces left out)."""
    return [m.group(1) for m in PLACEHOLDER.finditer(template) if m.group(1) is not None]


def template_problem(template: str) -> str | None:
    """Why a prompt template cannot be used (one paragraph), or None."""
    if len(template) > MAX_TEMPLATE_CHARS:
        size = f"{len(template):,} characters"
        return f"the prompt template holds {size}, more than {MAX_TEMPLATE_CHARS:,}"
    stray = PLACEHOLDER.sub("", template)
    if "{" in stray or "}" in stray:
        return (
            "the prompt template has an unmatched brace: write `{{` or `}}` for a literal "
            "brace, and `{name}` for a field"
        )
    names = template_placeholders(template)
    unknown = sorted(
        {
            name
            for name in names
            if name not in CRITERION_FIELDS + ITEM_FIELDS and not _METADATA_KEY.fullmatch(name)
        }
    )
    if unknown:
        shown = ", ".join("{" + name + "}" for name in unknown)
        known = ", ".join("{" + name + "}" for name in CRITERION_FIELDS + ITEM_FIELDS)
        return (
            f"the prompt template uses unknown placeholders {shown}: a template may name "
            f"{known} and {{metadata.KEY}} (a key of the item's metadata, letters, digits, "
            "_ and -); write `{{` and `}}` for literal braces"
        )
    if not any(name == "output" for name in names):
        return "the prompt template never shows the output to judge: add {output}"
    return None


def metadata_key(name: str) -> str | None:
    """The metadata key a placeholder names (`metadata.profile` → `profile`), or None."""
    match = _METADATA_KEY.fullmatch(name)
    return match.group(1) if match else None


class PassVote(BaseModel):
    """The judges' own pass/fail votes on one cell: the plan's `test_pass`.

    `share` counts the samples that scored and voted; a sample that scored without a usable
    vote is `n_missing` (its score still counts). `passed_by_vote` is share ≥ 0.5, None when no
    sample voted. `by_judge`: each judge's own share (None when it never voted)."""

    model_config = ConfigDict(extra="forbid")

    share: float | None
    passed_by_vote: bool | None
    n_pass: int
    n_fail: int
    n_missing: int
    by_judge: dict[str, float | None]


def pass_vote(votes: dict[str, list[bool | None]]) -> PassVote:
    """The cell's pass vote from each judge's votes (one per sample that scored)."""
    every = [v for mine in votes.values() for v in mine]
    n_pass = sum(v is True for v in every)
    n_fail = sum(v is False for v in every)
    share = n_pass / (n_pass + n_fail) if n_pass + n_fail else None

    def judge_share(mine: list[bool | None]) -> float | None:
        cast = [v for v in mine if v is not None]
        return sum(cast) / len(cast) if cast else None

    return PassVote(
        share=share,
        passed_by_vote=None if share is None else share >= 0.5,
        n_pass=n_pass,
        n_fail=n_fail,
        n_missing=sum(v is None for v in every),
        by_judge={judge: judge_share(mine) for judge, mine in votes.items()},
    )


def batch_prompt_problem(config: Any) -> str | None:
    """Why a batch's (a BatchConfig's) prompt template, pass vote or scoring templates cannot
    be used, or None. Templates word the one-output, one-criterion prompt; the vote is asked
    in combined calls too, never of a pair."""
    if config.prompt_template is not None:
        problem = template_problem(config.prompt_template)
        if problem:
            return problem
    for judge in config.judges:
        if judge.prompt_template is not None and (
            problem := template_problem(judge.prompt_template)
        ):
            return f"judge {judge.name}: {problem}"
    panel = config.panel
    templated = config.prompt_template is not None or any(j.prompt_template for j in panel)
    shaping = [
        what
        for what, on in (
            ("a judge's `scoring` other than likert", any(j.scoring != "likert" for j in panel)),
            ("a prompt template", templated),
        )
        if on
    ]
    if config.pairwise is not None and (shaping or config.pass_vote):
        asked = ", ".join((["pass_vote"] if config.pass_vote else []) + shaping)
        return (
            f"{asked} apply to one output judged on a criterion; a pairwise batch compares "
            "two outputs: remove them, or the `pairwise:` section"
        )
    if config.mode != "per_dimension" and shaping:
        return (
            f"{', '.join(shaping)} word a prompt for one criterion: set `mode: per_dimension` "
            "(a combined call scores every criterion at once in jury's own words)"
        )
    return None
