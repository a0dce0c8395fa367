"""Pooling judges so that one judge failing in a biased way cannot drag the result far:
the trimmed mean and the geometric median.

A mean moves without bound with one judge's score; the geometric median (the point with
the least summed distance to all the judges' points) has a breakdown point of one half: a
minority of judges cannot carry it beyond the range of the others (Minsker et al.; the
argument for LLM panels: arXiv 2606.30931). For one score per judge it is the (weighted)
median; on vectors (a judge's scores on several dimensions) it is not any coordinate's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# The share of judges cut from each end by the trimmed mean (at least one each end once three
# or more scored: a three-judge panel drops its highest and lowest score).
TRIM_FRACTION = 0.2


def trimmed_mean(values: Sequence[float], trim: float = TRIM_FRACTION) -> float:
    """The mean after cutting max(1, ⌊trim·n⌋) values from each end (none below 3 values)."""
    if not values:
        raise ValueError("no values")
    if not 0 <= trim < 0.5:
        raise ValueError("trim must lie in [0, 0.5)")
    ordered = sorted(values)
    n = len(ordered)
    cut = 0 if n < 3 else max(1, math.floor(trim * n))
    kept = ordered[cut : n - cut]
    return math.fsum(kept) / len(kept)


def _distance(a: Sequence[float], b: Sequence[float]) -> float:
    return math.sqrt(math.fsum((x - y) ** 2 for x, y in zip(a, b, strict=True)))


def geometric_median(
    points: Sequence[Sequence[float]],
    weights: Sequence[float] | None = None,
    tolerance: float = 1e-10,
    max_iterations: int = 1000,
) -> tuple[float, ...]:
    """The point minimizing Σ wᵢ·‖pᵢ − y‖, by Weiszfeld's iteration with Vardi and Zhang's
    step for an iterate that lands on a data point (plain Weiszfeld would divide by zero there
    or stop at a point that is not the minimum).

    Starts from the weighted mean; stops when a step moves less than `tolerance` times the
    points' spread.
    """
    if not points:
        raise ValueError("no points")
    w = list(weights) if weights is not None else [1.0] * len(points)
    if len(w) != len(points) or any(x < 0 for x in w) or sum(w) <= 0:
        raise ValueError("one non-negative weight per point, not all zero")
    dimension = len(points[0])
    total = sum(w)
    y = [
        math.fsum(wi * p[d] for wi, p in zip(w, points, strict=True)) / total
        for d in range(dimension)
    ]
    spread = max((_distance(p, y) for p in points), default=0.0)
    if spread == 0:
        return tuple(y)
    for _ in range(max_iterations):
        numerator = [0.0] * dimension
        inverse_total = 0.0
        weight_here = 0.0  # weight of data points at the iterate itself
        for wi, p in zip(w, points, strict=True):
            distance = _distance(p, y)
            if distance <= 1e-15 * spread:
                weight_here += wi
                continue
            inverse_total += wi / distance
            for d in range(dimension):
                numerator[d] += wi * p[d] / distance
        if inverse_total == 0:  # every point with weight sits at y
            break
        weiszfeld = [value / inverse_total for value in numerator]
        if weight_here == 0:
            new = weiszfeld
        else:
            # Vardi–Zhang: r = ‖Σ wᵢ(pᵢ − y)/‖pᵢ − y‖‖ over the other points; y is optimal when
            # r ≤ the weight at y, otherwise step towards the Weiszfeld point by 1 − weight/r.
            pull = [inverse_total * (weiszfeld[d] - y[d]) for d in range(dimension)]
            r = math.sqrt(math.fsum(v * v for v in pull))
            if r <= weight_here:
                break
            share = max(0.0, 1 - weight_here / r)
            new = [(1 - share) * y[d] + share * weiszfeld[d] for d in range(dimension)]
        moved = _distance(new, y)
        y = new
        if moved <= tolerance * spread:
            break
    return tuple(_snapped(points, w, y))


def _snapped(points: Sequence[Sequence[float]], w: Sequence[float], y: list[float]) -> list[float]:
    """The data point nearest `y` when it is itself the median (iterates approach such a
    point only linearly, never landing on it): its weight outweighs the pull of the rest."""
    index = min(range(len(points)), key=lambda i: _distance(points[i], y))
    nearest = points[index]
    pull = [0.0] * len(y)
    for i, (wi, p) in enumerate(zip(w, points, strict=True)):
        distance = _distance(p, nearest)
        if i != index and distance > 0:
            for d in range(len(y)):
                pull[d] += wi * (p[d] - nearest[d]) / distance
    here = sum(wi for wi, p in zip(w, points, strict=True) if _distance(p, nearest) == 0)
    if math.sqrt(math.fsum(v * v for v in pull)) <= here:
        return list(nearest)
    return y


def weighted_median_point(values: Sequence[float], weights: Sequence[float] | None = None) -> float:
    """The geometric median of one score per judge: the weighted median.

    In one dimension Σ wᵢ·|xᵢ − y| is minimized by every point between the two middle values
    when the weights split evenly there (an even panel of equal weights); Weiszfeld's
    iteration then stops wherever it entered that interval, often at the mean it started
    from. The midpoint of the interval is taken instead: the ordinary median, for equal
    weights.
    """
    if not values:
        raise ValueError("no values")
    w = list(weights) if weights is not None else [1.0] * len(values)
    if len(w) != len(values) or any(x < 0 for x in w) or sum(w) <= 0:
        raise ValueError("one non-negative weight per value, not all zero")
    ordered = sorted((v, x) for v, x in zip(values, w, strict=True) if x > 0)
    half = sum(x for _, x in ordered) / 2
    below = 0.0
    for index, (value, weight) in enumerate(ordered):
        below += weight
        if math.isclose(below, half, rel_tol=1e-12):
            return (value + ordered[index + 1][0]) / 2  # a flat interval: its midpoint
        if below > half:
            return value
    return ordered[-1][0]
