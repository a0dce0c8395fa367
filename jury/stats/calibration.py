"""Maps from a judge's scores to people's labels: isotonic regression and Platt scaling, and
k-fold cross-validation to choose between them (and leaving the scores as they are).

- **Isotonic**: the non-decreasing step function closest to the labels in squared error (pool
  adjacent violators), read between its points by linear interpolation and held flat beyond
  them, as scikit-learn's IsotonicRegression(out_of_bounds="clip") does.
- **Platt**: a logistic curve, label ≈ low + (high − low)·σ(a·score + b), fitted by Newton's
  method on the cross-entropy of the labels placed in [0, 1] (Platt 1999, with fractional
  targets and a small ridge so that perfectly separated scores still converge).

uqlm's ScoreCalibrator offers the same two; here both serve a score scale, not a probability.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jury.stats.measures import mean_absolute_error

Mapping = Callable[[float], float]


@dataclass(frozen=True)
class IsotonicFit:
    xs: tuple[float, ...]  # increasing
    ys: tuple[float, ...]  # non-decreasing

    def __call__(self, score: float) -> float:
        xs, ys = self.xs, self.ys
        if score <= xs[0]:
            return ys[0]
        if score >= xs[-1]:
            return ys[-1]
        low, high = 0, len(xs) - 1
        while high - low > 1:  # bisect for xs[low] <= score < xs[high]
            middle = (low + high) // 2
            if xs[middle] <= score:
                low = middle
            else:
                high = middle
        share = (score - xs[low]) / (xs[high] - xs[low])
        return ys[low] + share * (ys[high] - ys[low])


def fit_isotonic(
    scores: Sequence[float], labels: Sequence[float], weights: Sequence[float] | None = None
) -> IsotonicFit:
    """Pool adjacent violators over the distinct scores (equal scores first averaged)."""
    if len(scores) != len(labels) or not scores:
        raise ValueError("isotonic regression needs one label per score, and at least one")
    w = list(weights) if weights is not None else [1.0] * len(scores)
    merged: dict[float, list[float]] = {}
    for x, y, weight in zip(scores, labels, w, strict=True):
        total = merged.setdefault(x, [0.0, 0.0])
        total[0] += weight * y
        total[1] += weight
    xs = sorted(merged)
    # Blocks of adjacent scores pooled so far: [sum of weighted labels, weight, count].
    blocks: list[list[float]] = []
    for x in xs:
        blocks.append([*merged[x], 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            pooled = blocks.pop()
            for part in range(3):
                blocks[-1][part] += pooled[part]
    fitted = [total / weight for total, weight, count in blocks for _ in range(int(count))]
    return IsotonicFit(tuple(xs), tuple(fitted))


@dataclass(frozen=True)
class PlattFit:
    a: float
    b: float
    low: float
    high: float

    def __call__(self, score: float) -> float:
        z = self.a * score + self.b
        # σ(z) without overflow for large |z|
        p = 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))
        return self.low + (self.high - self.low) * p


def fit_platt(
    scores: Sequence[float],
    labels: Sequence[float],
    low: float,
    high: float,
    ridge: float = 1e-6,
    max_iterations: int = 100,
) -> PlattFit:
    """Newton's method on Σ −[t·log σ(a·x + b) + (1 − t)·log(1 − σ(a·x + b))] + ridge·a²/2,
    t = (label − low)/(high − low) clipped to [0, 1], x the scores standardized (then the
    coefficients are mapped back to raw scores)."""
    if len(scores) != len(labels) or not scores:
        raise ValueError("Platt scaling needs one label per score, and at least one")
    span = high - low
    n = len(scores)
    mean = math.fsum(scores) / n
    spread = math.sqrt(math.fsum((x - mean) ** 2 for x in scores) / n) or 1.0
    zs = [(x - mean) / spread for x in scores]
    targets = [min(1.0, max(0.0, (y - low) / span)) for y in labels]
    a = 0.0
    b = math.log((sum(targets) + 0.5) / (n - sum(targets) + 0.5))
    for _ in range(max_iterations):
        grad_a, grad_b = ridge * a, 0.0
        h_aa, h_ab, h_bb = ridge, 0.0, 1e-12
        for z, t in zip(zs, targets, strict=True):
            u = a * z + b
            p = 1 / (1 + math.exp(-u)) if u >= 0 else math.exp(u) / (1 + math.exp(u))
            residual = p - t
            grad_a += residual * z
            grad_b += residual
            curvature = p * (1 - p)
            h_aa += curvature * z * z
            h_ab += curvature * z
            h_bb += curvature
        determinant = h_aa * h_bb - h_ab * h_ab
        if determinant <= 0:
            break
        step_a = (h_bb * grad_a - h_ab * grad_b) / determinant
        step_b = (h_aa * grad_b - h_ab * grad_a) / determinant
        a, b = a - step_a, b - step_b
        if abs(step_a) + abs(step_b) < 1e-10:
            break
    # σ(a·(x − mean)/spread + b) = σ((a/spread)·x + (b − a·mean/spread))
    return PlattFit(a / spread, b - a * mean / spread, low, high)


def identity(score: float) -> float:
    return score


METHODS = ("identity", "isotonic", "platt")


def fit_method(
    method: str, scores: Sequence[float], labels: Sequence[float], low: float, high: float
) -> Mapping:
    if method == "isotonic":
        return fit_isotonic(scores, labels)
    if method == "platt":
        return fit_platt(scores, labels, low, high)
    if method == "identity":
        return identity
    raise ValueError(f"unknown calibration method {method!r}")


@dataclass(frozen=True)
class CrossValidation:
    """Held-out mean absolute error of each method against the labels, and the winner."""

    errors: dict[str, float]
    squared_errors: dict[str, float]
    best: str
    n_items: int
    folds: int
    held_out: list[float]  # the best method's prediction of each item, from the other folds


def cross_validate(
    scores: Sequence[float],
    labels: Sequence[float],
    folds_of: Sequence[int],
    low: float,
    high: float,
) -> CrossValidation:
    """Fit every method on all folds but one and measure it on the one left out, in turn.

    `folds_of[i]` is item i's fold (assigned per item, so that every judge of a panel is
    tested on the same held-out items). The best method has the lowest held-out mean absolute
    error; ties go to the simpler one (identity, then Platt's two parameters, then isotonic).
    """
    if not len(scores) == len(labels) == len(folds_of):
        raise ValueError("one label and one fold per score")
    predictions: dict[str, list[float]] = {method: [0.0] * len(scores) for method in METHODS}
    folds = sorted(set(folds_of))
    for fold in folds:
        train = [i for i, f in enumerate(folds_of) if f != fold]
        test = [i for i, f in enumerate(folds_of) if f == fold]
        for method in METHODS:
            if train:
                mapping = fit_method(
                    method, [scores[i] for i in train], [labels[i] for i in train], low, high
                )
            else:  # a single fold: nothing to learn from, keep the scores
                mapping = identity
            for i in test:
                predictions[method][i] = mapping(scores[i])
    errors = {m: mean_absolute_error(p, labels) or 0.0 for m, p in predictions.items()}
    squared = {
        m: math.fsum((x - y) ** 2 for x, y in zip(p, labels, strict=True)) / max(1, len(labels))
        for m, p in predictions.items()
    }
    simplest_first = ("identity", "platt", "isotonic")
    best = min(simplest_first, key=lambda m: (round(errors[m], 12), simplest_first.index(m)))
    return CrossValidation(errors, squared, best, len(scores), len(folds), predictions[best])
