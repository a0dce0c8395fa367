"""A module no test allows callable heuristics to come from: whoever checks a batch must
refuse it before importing it (tests look for it in sys.modules)."""

from __future__ import annotations

from jury.schemas.batch import Dimension, Item


def leaves_a_mark(item: Item, criterion: Dimension) -> float:
    return 1.0
