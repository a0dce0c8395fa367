"""Which stored sample rows count, in SQL: the store's side of reading samples as input.

The workers store only samples that could be true (schemas.sample_checks), but the store may
hold rows no worker of this version wrote. A row counts toward a batch's progress only when it
is one the batch plans (a dimension of the batch, a judge on its panel, an index below that
judge's `n`); it counts as scored only when its score lies in its dimension's range; its cost
counts only when it is a cost (finite, from 0 to MAX_SAMPLE_COST_USD). The cell's verdict
reads its rows through the same checks, in Python (jury.worker.judging.cell_verdict).

NaN and infinity fall out by themselves: PostgreSQL orders NaN above every number and SQLite
stores NaN as NULL, so neither is BETWEEN two finite bounds.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, case, false, func, or_

from jury.schemas.batch import BatchConfig
from jury.schemas.sample_checks import MAX_SAMPLE_COST_USD, score_range
from jury.store.models import SampleRow


def planned(config: BatchConfig, table: Any = SampleRow) -> ColumnElement[bool]:
    """The row is a sample the batch plans: of one of its dimensions, by a judge on its panel,
    with an index below that judge's `n`."""
    judges = [and_(table.judge == j.name, table.sample < j.n) for j in config.panel]
    dimensions = [d.name for d in config.dimensions]
    return and_(table.dimension.in_(dimensions), or_(false(), *judges))


def scored(config: BatchConfig, table: Any = SampleRow) -> ColumnElement[bool]:
    """The row holds a score within its dimension's range."""
    within = [
        and_(table.dimension == d.name, table.score.between(*score_range(config, d)))
        for d in config.dimensions
    ]
    return and_(table.score.is_not(None), or_(false(), *within))


def counted_cost(table: Any = SampleRow) -> ColumnElement[float]:
    """The row's cost where it is a cost, else 0."""
    return case((table.cost_usd.between(0.0, MAX_SAMPLE_COST_USD), table.cost_usd), else_=0.0)


def sample_totals(config: BatchConfig, table: Any = SampleRow) -> tuple[Any, Any, Any]:
    """(rows, failed rows, cost) of the rows `where` selects that the batch plans: the columns
    of a SELECT whose WHERE includes `planned(config)`."""
    return (
        func.count(),
        func.coalesce(func.sum(case((scored(config, table), 0), else_=1)), 0),
        func.coalesce(func.sum(counted_cost(table)), 0.0),
    )
