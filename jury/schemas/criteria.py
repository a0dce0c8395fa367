"""The registry of built-in criteria: a rubric and a default scale for each.

A batch names a built-in criterion by its id, or defines its own with a description; custom
criteria need no code change. Rubrics are written for a judge reading them cold.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from jury.schemas.identifiers import identifier_problem

# Letters (any script), digits, `_`, `.` and `-`, starting with a letter, digit or `_`: a
# criterion name is shown in tables, keys results and must never read as a path (`../x`).
_CRITERION_NAME = re.compile(r"\w[\w.-]*")


@dataclass(frozen=True)
class BuiltinCriterion:
    id: str
    description: str
    scale_min: float = 1
    scale_max: float = 5
    threshold: float = 3.5


_BUILTINS = (
    BuiltinCriterion(
        "relevance",
        "Does the output address what the input asks or needs? 5: every part is on point; "
        "3: partly on point, with digressions or gaps; 1: unrelated to the input.",
    ),
    BuiltinCriterion(
        "diversity",
        "Do the items or ideas in the output cover varied, non-redundant options, at the level "
        "of variety the input calls for? 5: varied and well balanced; 1: repetitive or one-note.",
    ),
    BuiltinCriterion(
        "quality",
        "Overall quality: correct, clear, well organised and useful. 5: excellent with no "
        "flaws; 3: acceptable with noticeable flaws; 1: poor or unusable.",
    ),
    BuiltinCriterion(
        "hypothesis_alignment",
        "How well does the output align with the stated hypothesis or intent in the context "
        "(for recommendations: the content hypothesis of the user profile)? 5: fully aligned; "
        "1: contradicts it.",
    ),
    BuiltinCriterion(
        "category_alignment",
        "Does the output match the primary category or domain the input and context point to? "
        "5: squarely in it; 1: in the wrong category.",
    ),
    BuiltinCriterion(
        "cross_disciplinary_coherence",
        "Where the output reaches outside the primary category, are those parts contextually "
        "linked and coherent with the rest? 5: every outside item is well motivated; 1: random.",
    ),
    BuiltinCriterion(
        "personalization_strength",
        "How strongly does the output reflect the specific user, history or context given, "
        "rather than generic content? 5: clearly tailored; 1: generic.",
    ),
    BuiltinCriterion(
        "topic_breadth",
        "Does the output span several distinct major themes where that is wanted? 5: broad and "
        "meaningful coverage; 1: a single narrow theme.",
    ),
    BuiltinCriterion(
        "helpfulness",
        "Would the output actually help the person who wrote the input reach their goal? "
        "5: fully solves it; 3: partly helps; 1: no help or harmful.",
    ),
    BuiltinCriterion(
        "accuracy",
        "Are the statements in the output factually correct and consistent with the reference "
        "and context when given? 5: no errors; 3: minor errors; 1: major errors or fabrication.",
    ),
    BuiltinCriterion(
        "depth",
        "Does the output go beyond the surface: reasons, trade-offs, specifics? 5: thorough and "
        "insightful; 1: superficial.",
    ),
    BuiltinCriterion(
        "creativity",
        "Is the output original and inventive where that serves the input? 5: fresh and apt; "
        "1: formulaic.",
    ),
    BuiltinCriterion(
        "level_of_detail",
        "Is the amount of detail right for the input: enough specifics, no padding? 5: exactly "
        "right; 1: far too thin or bloated.",
    ),
)

BUILTIN_CRITERIA: dict[str, BuiltinCriterion] = {c.id: c for c in _BUILTINS}


def builtin_criterion(criterion_id: str) -> BuiltinCriterion | None:
    return BUILTIN_CRITERIA.get(criterion_id)


# A rubric's anchor: "5: …" at the start, or after a space or a semicolon.
_ANCHOR = re.compile(r"(?<![^\s;])(\d+): ")


def rubric_on_scale(criterion: BuiltinCriterion, low: float, high: float) -> str:
    """The criterion's rubric with its anchors ("5: …", "1: …") moved to the same relative
    height on the scale `low`..`high`: on 1–10, relevance reads "10: every part is on point;
    5.5: partly …; 1: unrelated", so the prompt never contradicts the scale it asks for."""
    if (low, high) == (criterion.scale_min, criterion.scale_max):
        return criterion.description
    span = criterion.scale_max - criterion.scale_min

    def moved(match: re.Match[str]) -> str:
        relative = (float(match.group(1)) - criterion.scale_min) / span
        return f"{round(low + relative * (high - low), 2):g}: "

    return _ANCHOR.sub(moved, criterion.description)


def criterion_name_problem(name: str) -> str | None:
    """Why `name` cannot name a criterion, or None if it can."""
    problem = identifier_problem(name, "criterion name")
    if problem:
        return problem
    if not _CRITERION_NAME.fullmatch(name):
        return f"criterion name {name!r} may hold only letters, digits, '_', '.' and '-'"
    return None
