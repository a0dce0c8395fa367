"""A built-in criterion's rubric follows the scale it is judged on (issue 13: a 1–10 scale kept
the 1–5 anchors, and the prompt contradicted itself)."""

from __future__ import annotations

from jury.schemas.batch import Dimension
from jury.schemas.criteria import BUILTIN_CRITERIA


def test_anchors_move_to_the_same_height_on_another_scale() -> None:
    ten = Dimension.model_validate({"name": "relevance", "scale": {"min": 1, "max": 10}})
    assert ten.description is not None
    assert "10: every part is on point" in ten.description
    assert "5.5: partly on point" in ten.description and "1: unrelated" in ten.description
    assert "5: every part" not in ten.description
    percent = Dimension.model_validate({"name": "accuracy", "scale": {"min": 0, "max": 100}})
    assert percent.description is not None
    assert "100: no errors; 50: minor errors; 0: major errors" in percent.description


def test_the_default_scale_and_a_rubric_of_ones_own_are_kept() -> None:
    default = Dimension.model_validate("relevance")
    assert default.description == BUILTIN_CRITERIA["relevance"].description
    own = Dimension.model_validate(
        {"name": "relevance", "description": "5: mine; 1: also mine", "scale": {"max": 10}}
    )
    assert own.description == "5: mine; 1: also mine"
