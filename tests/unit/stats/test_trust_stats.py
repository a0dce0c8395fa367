"""jury.stats: every statistic against hand-computed values and, where one exists, a reference
implementation (scipy, scikit-learn), on random data with ties."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.stats import kendalltau, pearsonr, trim_mean
from sklearn.isotonic import IsotonicRegression
from sklearn.metrics import cohen_kappa_score

from jury.stats.bootstrap import bootstrap_intervals, percentile, resamples_for
from jury.stats.calibration import cross_validate, fit_isotonic, fit_platt
from jury.stats.effective import defined_subset, effective_number, pairwise_complete
from jury.stats.measures import (
    kendall_tau_b,
    mean_absolute_error,
    pass_accuracy,
    pearson,
    preference_accuracy,
    quadratic_weighted_kappa,
    rounded_category,
)
from jury.stats.robust import geometric_median, trimmed_mean, weighted_median_point


def scores(rng: random.Random, n: int, fractional: bool = False) -> list[float]:
    return [rng.randint(1, 5) + (rng.choice((0, 0.5)) if fractional else 0) for _ in range(n)]


# --- agreement measures ----------------------------------------------------------------------


def test_kendall_by_hand_and_against_scipy() -> None:
    # pairs (1,1) (2,3) (3,2) (4,4): 5 concordant, 1 discordant, no ties → (5 − 1) / 6
    assert kendall_tau_b([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)
    assert kendall_tau_b([1, 2, 3], [3, 2, 1]) == pytest.approx(-1)
    assert kendall_tau_b([1, 1, 1], [1, 2, 3]) is None  # one side constant
    assert kendall_tau_b([1], [2]) is None
    rng = random.Random(1)
    for trial in range(200):
        n = rng.randint(2, 60)
        xs, ys = scores(rng, n, trial % 2 == 0), scores(rng, n)
        expected = kendalltau(xs, ys).statistic
        found = kendall_tau_b(xs, ys)
        assert (found is None and math.isnan(expected)) or found == pytest.approx(expected)


def test_quadratic_kappa_by_hand_and_against_scikit_learn() -> None:
    assert quadratic_weighted_kappa([1, 2, 3], [1, 2, 3]) == 1.0
    # Σ(a−b)² = 8, expected 3·14 + 3·14 − 2·6·6 = 12: 1 − 3·8/12
    assert quadratic_weighted_kappa([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert quadratic_weighted_kappa([3, 3], [3, 3]) is None
    assert quadratic_weighted_kappa([2.4, 3.6], [2, 4]) == 1.0  # whole points of the scale
    assert rounded_category(2.5) == 3 and rounded_category(3.49) == 3
    rng = random.Random(2)
    for _ in range(200):
        n = rng.randint(2, 50)
        a, b = scores(rng, n), scores(rng, n)
        expected = cohen_kappa_score(a, b, labels=[1, 2, 3, 4, 5], weights="quadratic")
        found = quadratic_weighted_kappa(a, b)
        assert (found is None and math.isnan(expected)) or found == pytest.approx(expected)


def test_pearson_errors_and_accuracies() -> None:
    rng = random.Random(3)
    xs, ys = scores(rng, 40, True), scores(rng, 40)
    assert pearson(xs, ys) == pytest.approx(pearsonr(xs, ys).statistic)
    assert pearson([1, 1], [1, 2]) is None
    assert mean_absolute_error([1, 2, 5], [2, 2, 3]) == pytest.approx(1.0)
    assert mean_absolute_error([], []) is None
    # threshold 3.5: the label passes for 4 and 5; the guesses match on items 1, 2 and 4
    assert pass_accuracy([True, False, True, False], [4, 2, 3, 3], 3.5) == 0.75
    # right, wrong, a tie against a side (half), a tie against a tie (right)
    assert preference_accuracy(["A", "A", "tie", "tie"], ["A", "B", "B", "tie"]) == 2.5 / 4
    with pytest.raises(ValueError, match="same length"):
        mean_absolute_error([1], [1, 2])


# --- bootstrap -------------------------------------------------------------------------------


def test_percentile_matches_numpy() -> None:
    values = sorted(random.Random(4).random() for _ in range(37))
    for q in (0.0, 0.025, 0.5, 0.975, 1.0):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, 100 * q)))


def test_bootstrap_intervals_are_seeded_paired_and_honest() -> None:
    rng = random.Random(5)
    values = [rng.gauss(10, 2) for _ in range(200)]

    def mean_of(units: Sequence[int]) -> float:
        return statistics.fmean(values[i] for i in units)

    def shifted(units: Sequence[int]) -> float:
        return mean_of(units) + 1

    first = bootstrap_intervals(len(values), {"mean": mean_of, "shifted": shifted}, seed=7)
    again = bootstrap_intervals(len(values), {"mean": mean_of, "shifted": shifted}, seed=7)
    assert first == again
    low, high = first["mean"] or (0, 0)
    assert low < statistics.fmean(values) < high
    # 2·sd/√n ≈ 0.28 either side: the interval has about that width
    assert 0.4 < high - low < 0.7
    # the same resamples for every statistic: the shifted interval is the same, shifted
    shifted_low, shifted_high = first["shifted"] or (0, 0)
    assert shifted_low == pytest.approx(low + 1) and shifted_high == pytest.approx(high + 1)
    assert bootstrap_intervals(1, {"mean": mean_of})["mean"] is None
    assert bootstrap_intervals(50, {"never": lambda units: None})["never"] is None
    assert resamples_for(100) == 400 and resamples_for(2000) == 100 and resamples_for(10**6) == 50


# --- effective number of judges --------------------------------------------------------------


def test_kish_effective_number_by_hand() -> None:
    identity = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    assert effective_number(identity) == 3
    assert effective_number([[1.0] * 3] * 3) == 1
    half = [[1.0, 0.5, 0.5], [0.5, 1.0, 0.5], [0.5, 0.5, 1.0]]
    assert effective_number(half) == pytest.approx(3 / (1 + 2 * 0.5))
    # weights: Kish's (Σw)² / Σw² for independent judges
    assert effective_number(identity, [1, 1, 2]) == pytest.approx(16 / 6)
    # errors that cancel would make the panel worth more than its size: capped at k
    assert effective_number([[1.0, -1.0], [-1.0, 1.0]]) == 2
    assert effective_number([[1.0, None], [None, 1.0]]) is None


def test_pairwise_complete_correlations_and_defined_subset() -> None:
    columns: list[list[float | None]] = [[1, 2, 3, 4, None], [2, 1, 4, 3, 5], [3, 3, 3, 3, 3]]
    matrix = pairwise_complete(columns)
    assert matrix[0][1] == pytest.approx(pearsonr([1, 2, 3, 4], [2, 1, 4, 3]).statistic)
    assert matrix[0][2] is None and matrix[1][2] is None  # a constant judge
    assert defined_subset(matrix) == [0, 1]


# --- calibration -----------------------------------------------------------------------------


def test_isotonic_regression_against_scikit_learn() -> None:
    rng = random.Random(6)
    for _ in range(100):
        n = rng.randint(2, 40)
        xs, ys = scores(rng, n, True), [rng.randint(1, 5) + rng.random() for _ in range(n)]
        reference = IsotonicRegression(out_of_bounds="clip").fit(xs, ys)
        fitted = fit_isotonic(xs, ys)
        for x in (0, 1, 1.25, 2.5, 3, 4.75, 5, 6):
            assert fitted(x) == pytest.approx(float(reference.predict([x])[0]))


def test_platt_scaling_minimizes_the_cross_entropy() -> None:
    rng = random.Random(7)
    for _ in range(20):
        xs = np.array([rng.gauss(3, 1) for _ in range(60)])
        targets = np.clip((xs + np.array([rng.gauss(0, 1) for _ in xs]) - 1) / 4, 0, 1)

        def loss(p: np.ndarray, xs: np.ndarray = xs, targets: np.ndarray = targets) -> float:
            z = p[0] * xs + p[1]
            return float(np.sum(np.logaddexp(0, z) - targets * z))

        reference = minimize(loss, [0.0, 0.0], method="BFGS", options={"gtol": 1e-10}).x
        fitted = fit_platt(list(xs), list(targets * 4 + 1), 1, 5, ridge=0)
        assert (fitted.a, fitted.b) == pytest.approx(tuple(reference), abs=1e-4)
    # separable ends: the curve steepens until the small ridge holds it, centred on 2
    steep = fit_platt([1, 2, 3], [1, 3, 5], 1, 5)
    assert steep(2) == pytest.approx(3) and steep(3) > 4.9 and steep(1) < 1.1


def test_cross_validation_keeps_good_scores_and_fixes_an_offset() -> None:
    rng = random.Random(8)
    truth = [rng.uniform(1, 5) for _ in range(100)]
    folds = [i % 5 for i in range(100)]
    same = cross_validate(truth, truth, folds, 1, 5)
    assert same.best == "identity" and same.errors["identity"] == 0
    lenient = [min(5.0, t + 1) for t in truth]
    fixed = cross_validate(lenient, truth, folds, 1, 5)
    assert fixed.best in ("isotonic", "platt")
    assert fixed.errors[fixed.best] < fixed.errors["identity"] / 2
    assert len(fixed.held_out) == 100


# --- robust pooling --------------------------------------------------------------------------


def test_trimmed_mean_by_hand_and_against_scipy() -> None:
    assert trimmed_mean([1, 2, 3, 100]) == 2.5  # drops 1 and 100
    assert trimmed_mean([1, 5]) == 3  # fewer than three: the mean
    rng = random.Random(9)
    for n in range(5, 30):
        values = [rng.random() for _ in range(n)]
        if int(0.2 * n) >= 1:
            assert trimmed_mean(values, 0.2) == pytest.approx(trim_mean(values, 0.2))


def test_geometric_median_in_two_dimensions_against_a_minimizer() -> None:
    assert geometric_median([[0, 0], [2, 0], [0, 2], [2, 2]]) == pytest.approx((1, 1))
    # a point holding half the weight or more is the median (Vardi–Zhang stops there)
    assert geometric_median([[0, 0], [5, 5], [9, 1]], [3, 1, 1]) == pytest.approx((0, 0))
    rng = random.Random(10)
    for _ in range(30):
        points = np.array([[rng.gauss(0, 1), rng.gauss(0, 1)] for _ in range(rng.randint(3, 9))])
        weights = np.array([rng.random() + 0.1 for _ in points])

        def cost(
            y: np.ndarray, points: np.ndarray = points, weights: np.ndarray = weights
        ) -> float:
            return float(np.sum(weights * np.linalg.norm(points - y, axis=1)))

        reference = minimize(cost, points.mean(0), method="Nelder-Mead", options={"xatol": 1e-10})
        found = np.array(geometric_median(points.tolist(), weights.tolist()))
        assert cost(found) <= cost(reference.x) + 1e-7


def test_weighted_median_point_is_the_median_and_resists_one_extreme() -> None:
    rng = random.Random(11)
    for _ in range(300):
        values = scores(rng, rng.randint(1, 8), True)
        assert weighted_median_point(values) == statistics.median(values)
    assert weighted_median_point([1, 2, 3], [1, 1, 5]) == 3
    honest = [3.0, 3.5, 2.5]
    assert weighted_median_point([*honest, 5.0]) == 3.25  # the mean would be 3.5
