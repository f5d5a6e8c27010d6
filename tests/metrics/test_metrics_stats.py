"""t intervals, the IQM, percentile bootstrap intervals (plain and stratified), performance
profiles and the probability of improvement, against values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from telapa.metrics.aggregates import (
    performance_profile,
    performance_profile_interval,
    probability_of_improvement,
    probability_of_improvement_interval,
)
from telapa.metrics.stats import aggregate, bootstrap_interval, iqm, mean_ci

T975_DF1 = math.tan(math.pi * 0.475)  # Cauchy: t_{.975,1} = tan(0.475 pi) = 12.7062...
T975_DF2 = 0.95 / math.sqrt(2 * 0.975 * 0.025)  # df 2: (2p-1)/sqrt(2p(1-p)) = 4.3027...


def test_mean_ci_by_hand():
    # [1, 3]: mean 2, s = sqrt(2), half = t_{.975,1} * sqrt(2) / sqrt(2)
    mean, half, n = mean_ci([1.0, 3.0])
    assert (mean, n) == (2.0, 2) and half == pytest.approx(T975_DF1, rel=1e-12)
    # [1, 2, 3]: mean 2, s = 1, half = 4.302653 / sqrt(3) = 2.484138
    mean, half, n = mean_ci([1.0, 2.0, 3.0])
    assert (mean, n) == (2.0, 3) and half == pytest.approx(2.4841377118, rel=1e-9)
    # NaN dropped, n counts what is used
    assert mean_ci([1.0, math.nan, 3.0])[::2] == (2.0, 2)
    mean, half, n = mean_ci([0.25])
    assert mean == 0.25 and math.isnan(half) and n == 1
    mean, half, n = mean_ci([math.nan])
    assert math.isnan(mean) and math.isnan(half) and n == 0
    with pytest.raises(ValueError, match="confidence"):
        mean_ci([1.0, 2.0], confidence=95)


def test_iqm_of_eight_numbers_by_hand():
    # sorted 1 2 3 5 7 8 9 100: floor(8/4) = 2 cut at each end -> mean(3, 5, 7, 8) = 5.75
    assert iqm([9, 1, 7, 3, 100, 5, 2, 8]) == pytest.approx(5.75)
    # a runs x tasks matrix is flattened; NaN dropped: the same eight values
    assert iqm([[9, 1, 7], [3, 100, 5], [2, 8, math.nan]]) == pytest.approx(5.75)
    assert aggregate([[9, 1], [3, math.nan]], statistic="mean") == pytest.approx(13 / 3)
    assert math.isnan(iqm([math.nan]))


def test_bootstrap_interval_of_a_known_case():
    # Four 0s and four 1s: the mean of a resample is Binomial(8, 1/2) / 8;
    # P(<= 0) = 1/256 < 0.025 < P(<= 1) = 9/256, so q_.025 = 1/8 and, symmetrically,
    # q_.975 = 7/8.
    lo, hi = bootstrap_interval([0.0] * 4 + [1.0] * 4, n_resamples=20_000)
    assert (lo, hi) == (0.125, 0.875)
    assert lo <= 0.5 <= hi


def test_bootstrap_interval_of_success_rates_stays_in_the_unit_interval():
    sr = np.array([1.0, 1.0, 1.0, 1.0, 0.2])  # mean 0.84, s = 0.358
    mean, half, _ = mean_ci(sr)
    assert mean + half > 1.0  # the t interval leaves [0, 1] (1.284)
    for statistic in ("mean", "iqm"):
        lo, hi = bootstrap_interval(sr, statistic=statistic, n_resamples=2_000)
        assert 0.2 <= lo <= hi <= 1.0
    lo, hi = bootstrap_interval(sr, n_resamples=2_000)
    assert lo <= mean <= hi
    assert bootstrap_interval(sr, n_resamples=2_000) == (lo, hi)  # seeded: the same twice


def test_bootstrap_resamples_whole_runs_or_each_tasks_runs():
    # Four runs of two tasks, a seed good or bad on both (positively correlated tasks).
    # Whole runs: a resample's mean is Binomial(4, 1/2) / 4, P(0) = 1/16 > 2.5%, so the
    # interval is [0, 1]. Each task's runs apart (rliable's stratified bootstrap): the
    # mean is Binomial(8, 1/2) / 8 as in the known case above, [0.125, 0.875]: narrower
    # than the data allow, because it treats a seed's two tasks as independent runs.
    together = np.array([[0.0, 0.0], [1.0, 1.0], [0.0, 0.0], [1.0, 1.0]])
    assert bootstrap_interval(together, n_resamples=20_000) == (0.0, 1.0)
    assert bootstrap_interval(together, resample="tasks", n_resamples=20_000) == (0.125, 0.875)
    # Negatively correlated tasks: every run's mean is 1/2, so is every whole-run resample
    opposed = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    assert bootstrap_interval(opposed, n_resamples=1_000) == (0.5, 0.5)
    lo, hi = bootstrap_interval(opposed, resample="tasks", n_resamples=1_000)
    assert lo < 0.5 < hi
    # Missing scores: whole runs refuse them, naming the run; stratified drops them, and
    # a task with a single run cannot be resampled
    partial = [[0.1, 0.2], [0.3, math.nan], [0.5, 0.6]]
    with pytest.raises(ValueError, match=r"run\(s\) \[1\]"):
        bootstrap_interval(partial)
    assert bootstrap_interval(partial, resample="tasks", n_resamples=500)[0] >= 0.1
    assert all(math.isnan(v) for v in bootstrap_interval([[0.1, 0.2], [0.3, math.nan]],
                                                         resample="tasks"))
    assert all(math.isnan(v) for v in bootstrap_interval([[0.1, 0.2]]))  # one run
    with pytest.raises(ValueError, match="1-D .* or 2-D"):
        bootstrap_interval(np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match="resample"):
        bootstrap_interval(together, resample="seeds")


X = np.array([[0.1, 0.5], [0.9, 0.6], [0.3, 0.2]])  # 3 runs x 2 tasks
Y = np.array([[0.0, 0.5], [0.2, 0.1]])               # 2 runs x 2 tasks


def test_performance_profile_by_hand():
    # tau 0: all runs above on both tasks -> 1; tau 0.25: task 1 {0.9, 0.3} 2/3, task 2
    # {0.5, 0.6} 2/3 -> 2/3; tau 0.5: task 1 {0.9} 1/3, task 2 {0.6} (0.5 is not above) 1/3
    assert performance_profile(X, taus=[0.0, 0.25, 0.5, 1.0]) == pytest.approx(
        [1.0, 2 / 3, 1 / 3, 0.0])
    for resample in ("runs", "tasks"):
        lo, hi = performance_profile_interval(X, taus=[0.0, 0.25, 0.5], resample=resample,
                                              n_resamples=2_000)
        assert lo.shape == hi.shape == (3,)
        assert np.all((0 <= lo) & (lo <= hi) & (hi <= 1))
        assert lo[0] == hi[0] == 1.0  # every value is above 0 in every resample
    # whole runs of the correlated example: a resample's F(0.5) is that of its runs,
    # Binomial(4, 1/2) / 4 again -> [0, 1]
    lo, hi = performance_profile_interval([[0.0, 0.0], [1.0, 1.0]] * 2, taus=[0.5],
                                          n_resamples=20_000)
    assert (lo[0], hi[0]) == (0.0, 1.0)
    with pytest.raises(ValueError, match="taus"):
        performance_profile(X, taus=[])


def test_probability_of_improvement_by_hand():
    # task 1: x {0.1, 0.9, 0.3} vs y {0, 0.2}: 0.1 beats 0; 0.9 and 0.3 beat both -> 5/6
    # task 2: x {0.5, 0.6, 0.2} vs y {0.5, 0.1}: 0.5 ties 0.5 (1/2) and beats 0.1, 0.6 beats
    # both, 0.2 beats 0.1 -> 4.5/6; P = (5/6 + 4.5/6) / 2 = 0.791666...
    assert probability_of_improvement(X, Y) == pytest.approx(9.5 / 12)
    assert probability_of_improvement(Y, X) == pytest.approx(1 - 9.5 / 12)
    # each task's term is the Mann-Whitney U statistic over N K pairs
    u = stats.mannwhitneyu(X[:, 0], Y[:, 0]).statistic
    assert u / 6 == pytest.approx(5 / 6)
    for resample in ("runs", "tasks"):
        lo, hi = probability_of_improvement_interval(X, Y, resample=resample,
                                                     n_resamples=2_000)
        assert 0.0 <= lo <= 9.5 / 12 <= hi <= 1.0
    # X always above Y: every resample gives 1
    assert probability_of_improvement_interval(X + 1, Y, n_resamples=200) == (1.0, 1.0)
    assert probability_of_improvement(X[:, 0], X[:, 0]) == 0.5
    with pytest.raises(ValueError, match="same"):
        probability_of_improvement(X, Y[:, :1])
