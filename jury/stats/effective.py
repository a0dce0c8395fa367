"""How many independent judges a panel is worth.

Kish's effective sample size for k equally weighted votes whose errors have mean pairwise
correlation ρ̄ is n_eff = k / (1 + (k − 1)·ρ̄), the design effect of a cluster. It is the
number of *independent* judges whose mean would be as steady: the variance of the mean of k
unit-variance errors with correlation matrix R is 1ᵀR1 / k², and n independent ones give
1 / n, so n_eff = k² / 1ᵀR1, which is the formula above. With weights w (a weighted mean) it
is (Σw)² / wᵀRw, which for independent judges (R = I) is Kish's familiar (Σw)² / Σw².

Kohli (arXiv 2605.29800) measured this way found nine frontier judges worth about two.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations

from jury.stats.measures import pearson


def pairwise_complete(
    columns: Sequence[Sequence[float | None]],
) -> list[list[float | None]]:
    """Pearson correlations between columns (one per judge, one value per item, None where
    the judge has none), each pair over the items both have. The diagonal is 1."""
    k = len(columns)
    matrix: list[list[float | None]] = [
        [1.0 if i == j else None for j in range(k)] for i in range(k)
    ]
    for i, j in combinations(range(k), 2):
        shared = [
            (x, y)
            for x, y in zip(columns[i], columns[j], strict=True)
            if x is not None and y is not None and not (math.isnan(x) or math.isnan(y))
        ]
        r = pearson([x for x, _ in shared], [y for _, y in shared]) if shared else None
        matrix[i][j] = matrix[j][i] = r
    return matrix


def effective_number(
    correlations: Sequence[Sequence[float | None]], weights: Sequence[float] | None = None
) -> float | None:
    """Kish's effective number of judges, (Σw)² / wᵀRw, kept within [1, k].

    An undefined correlation (too few shared items, a constant judge) makes the whole
    figure undefined: None. Errors correlated below zero would make a panel worth more than
    its size; the figure is capped at k, the most independent judges can be worth.
    """
    k = len(correlations)
    if k == 0:
        return None
    w = list(weights) if weights is not None else [1.0] * k
    if len(w) != k or any(x < 0 for x in w) or sum(w) <= 0:
        raise ValueError("one non-negative weight per judge, not all zero")
    quadratic = 0.0
    for i in range(k):
        for j in range(k):
            r = correlations[i][j]
            if r is None:
                return None
            quadratic += w[i] * w[j] * r
    if quadratic <= 0:
        return float(k)
    return max(1.0, min(float(k), sum(w) ** 2 / quadratic))


def defined_subset(correlations: Sequence[Sequence[float | None]]) -> list[int]:
    """The judges (indices) whose correlations with each other are all defined: a judge that
    gives every item the same score, or shares too few items, is left out, the judge with the
    most undefined correlations first."""
    kept = list(range(len(correlations)))
    while True:
        missing = {i: sum(correlations[i][j] is None for j in kept) for i in kept}
        worst = max(kept, key=lambda i: (missing[i], i), default=None)
        if worst is None or missing[worst] == 0:
            return kept
        kept.remove(worst)
