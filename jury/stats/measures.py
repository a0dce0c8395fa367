"""Agreement between a rater's scores and people's labels, one pair of sequences at a time.

Each function returns None where the measure is undefined (too few values, a constant side),
never a made-up number. Spearman's rho (jury.stats.ranks) is re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from jury.stats.ranks import spearman

__all__ = [
    "kendall_tau_b",
    "mean_absolute_error",
    "pass_accuracy",
    "pearson",
    "preference_accuracy",
    "quadratic_weighted_kappa",
    "spearman",
]

Side = Literal["A", "B", "tie"]


def _same_length(xs: Sequence[object], ys: Sequence[object]) -> None:
    if len(xs) != len(ys):
        raise ValueError("the two sequences must have the same length")


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's r; None with fewer than two pairs or a constant side."""
    _same_length(xs, ys)
    n = len(xs)
    if n < 2:
        return None
    mx, my = math.fsum(xs) / n, math.fsum(ys) / n
    sxy = math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    syy = math.fsum((y - my) ** 2 for y in ys)
    if sxx <= 0 or syy <= 0:
        return None
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def _tied_pairs(sorted_values: Sequence[object]) -> int:
    """Pairs of equal values in a sorted sequence."""
    total = run = 0
    for index in range(1, len(sorted_values) + 1):
        if index < len(sorted_values) and sorted_values[index] == sorted_values[index - 1]:
            run += 1
            continue
        total += run * (run + 1) // 2
        run = 0
    return total


def _count_swaps(values: Sequence[float]) -> int:
    """The number of inversions in `values` (pairs out of order), by a bottom-up merge sort."""
    current = list(values)
    n = len(current)
    merged = current[:]
    swaps = 0
    width = 1
    while width < n:
        for start in range(0, n, 2 * width):
            middle, end = min(start + width, n), min(start + 2 * width, n)
            i, j, k = start, middle, start
            while i < middle and j < end:
                if current[j] < current[i]:
                    merged[k] = current[j]
                    swaps += middle - i  # current[j] jumps every value left in the first run
                    j += 1
                else:
                    merged[k] = current[i]
                    i += 1
                k += 1
            merged[k : k + middle - i] = current[i:middle]
            k += middle - i
            merged[k : k + end - j] = current[j:end]
        current, merged = merged, current
        width *= 2
    return swaps


def kendall_tau_b(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Kendall's tau-b (ties in either ranking corrected), in O(n log n) by Knight's method:
    sort by x then y, count the exchanges a merge sort by y needs; those are the discordant
    pairs. None with fewer than two pairs or a constant side."""
    _same_length(xs, ys)
    n = len(xs)
    if n < 2:
        return None
    pairs = sorted(zip(xs, ys, strict=True))
    total = n * (n - 1) // 2
    ties_x = _tied_pairs([x for x, _ in pairs])
    ties_xy = _tied_pairs(pairs)
    discordant = _count_swaps([y for _, y in pairs])
    ties_y = _tied_pairs(sorted(ys))
    denominator = (total - ties_x) * (total - ties_y)
    if denominator <= 0:
        return None
    concordant_minus_discordant = total - ties_x - ties_y + ties_xy - 2 * discordant
    return concordant_minus_discordant / math.sqrt(denominator)


def rounded_category(value: float) -> int:
    """The value as a whole point of the scale, rounded half up."""
    return math.floor(value + 0.5)


def quadratic_weighted_kappa(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Cohen's kappa with quadratic weights, both sides rounded to whole points of the scale.

    kappa = 1 − Σ w·observed / Σ w·expected with w = (i − j)²; the expected disagreement over
    all pairs of a rater's and the labels' values is N·Σa² + N·Σb² − 2·Σa·Σb, so neither the
    confusion matrix nor the scale's ends are needed (points of the scale nobody used add
    nothing). None when both sides are one same constant.
    """
    _same_length(xs, ys)
    n = len(xs)
    if n == 0:
        return None
    a = [rounded_category(x) for x in xs]
    b = [rounded_category(y) for y in ys]
    observed = sum((i - j) ** 2 for i, j in zip(a, b, strict=True))
    sum_a, sum_b = sum(a), sum(b)
    expected = n * sum(i * i for i in a) + n * sum(j * j for j in b) - 2 * sum_a * sum_b
    if expected == 0:
        return None
    return 1.0 - n * observed / expected


def mean_absolute_error(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    _same_length(xs, ys)
    if not xs:
        return None
    return math.fsum(abs(x - y) for x, y in zip(xs, ys, strict=True)) / len(xs)


def pass_accuracy(
    predicted: Sequence[bool], labels: Sequence[float], threshold: float
) -> float | None:
    """The share of items whose predicted pass/fail matches the label's (label ≥ threshold).
    A judge predicts pass when its score reaches the threshold; a panel, by its verdict."""
    _same_length(predicted, labels)
    if not predicted:
        return None
    same = sum(guess == (y >= threshold) for guess, y in zip(predicted, labels, strict=True))
    return same / len(predicted)


def preference_accuracy(predicted: Sequence[Side], labels: Sequence[Side]) -> float | None:
    """The share of pairs whose winner matches people's preference. A tie called against a
    side people preferred counts half (as a coin would), so chance is 50 % whatever the
    rater's tie rate; a label `tie` is matched only by a tie."""
    _same_length(predicted, labels)
    if not predicted:
        return None
    credit = 0.0
    for guess, truth in zip(predicted, labels, strict=True):
        if guess == truth:
            credit += 1.0
        elif guess == "tie" and truth != "tie":
            credit += 0.5
    return credit / len(predicted)
