"""Comparisons over seeds: the sign-flip test enumerated by hand, Welch's t by hand, Holm
on three p-values, and the seeds each test would need."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from telapa.metrics.comparisons import (
    compare,
    holm,
    paired_seeds_to_decide,
    sign_flip_p,
    welch_p,
    welch_seeds_to_decide,
)


def test_sign_flip_p_enumerated_by_hand():
    # d = a - b = (0.5, -0.5, 1, 1, 1), sum 3. Of the 2^5 = 32 sign patterns, the sum is
    # >= 3 only with the three 1s positive and the halves (+, +) 4, (+, -) 3 or (-, +) 3:
    # p = 3/32. The other direction: every pattern but the all-positive one (sum 4) has a
    # sum <= 3, p = 31/32.
    a, b = [1.0, 2.0, 3.0, 4.0, 5.0], [0.5, 2.5, 2.0, 3.0, 4.0]
    assert sign_flip_p(a, b) == pytest.approx(3 / 32)
    assert sign_flip_p(a, b, better="lower") == pytest.approx(31 / 32)
    assert sign_flip_p(b, a, better="lower") == pytest.approx(3 / 32)
    # five seeds: the smallest possible p is 1/32
    assert sign_flip_p([1.0] * 5, [0.0] * 5) == pytest.approx(1 / 32)
    assert sign_flip_p([0.3] * 5, [0.3] * 5) == 1.0  # no difference at all


def test_sign_flip_p_counts_a_tying_pattern_exactly():
    # TeLAPA minus TeLAPA-Static per seed at the paper's budget: 1/5, -26/125, 0, 1/125,
    # 1/250 (SRs over 50 and 250 episodes), sum 1/250 = .004. Signs of the non-zero four
    # (.2, -.208, .008, .004), each count doubled by the zero's two signs:
    #   (+, +) -.008: only (+, +) for the rest reaches .004 (the observed pattern)  1
    #   (+, -) .408: every sign of the rest                                           4
    #   (-, +) -.408: none                                                            0
    #   (-, -) .008: (+, +) .02, (+, -) .012, (-, +) .004 (the tie); not (-, -)      3
    # 8 of 16, i.e. p = 16/32 = 0.5 with the tie counted.
    a = [Fraction(1, 5), Fraction(-26, 125), Fraction(0), Fraction(1, 125), Fraction(1, 250)]
    count = 0
    for signs in itertools.product((1, -1), repeat=5):
        if sum(s * d for s, d in zip(signs, a, strict=True)) >= sum(a):
            count += 1
    assert count == 16  # exact: 16 of 32 patterns, the tie included
    b = [Fraction(3, 10), Fraction(1, 2), Fraction(7, 10), Fraction(11, 100), Fraction(1, 5)]
    x = [v + w for v, w in zip(a, b, strict=True)]  # a_i = b_i + d_i, exactly
    assert sign_flip_p(x, b) == 0.5
    assert sign_flip_p(b, x, better="lower") == 0.5
    # floats are read as the decimals they print as: the same values typed in
    typed = [0.5, 0.292, 0.7, 0.118, 0.204]
    assert sign_flip_p(typed, [float(v) for v in b]) == 0.5
    # the same differences summed in floating point lose the tying pattern
    floats = [float(v) for v in b]
    d = np.array([float(v) + w for v, w in zip(a, floats, strict=True)]) - np.array(floats)
    signs = 1 - 2 * ((np.arange(32)[:, None] >> np.arange(5)) & 1)
    assert np.count_nonzero(signs @ d >= d.sum()) == 14


def test_sign_flip_p_monte_carlo_beyond_sixteen_pairs():
    # d = twelve 1s and five -1s (sum 7); a sign pattern with k negative signs sums to
    # 17 - 2k, so p = P(k <= 5) = (1 + 17 + 136 + 680 + 2380 + 6188) / 2^17 = 0.07173
    a, b = np.array([1.0] * 12 + [0.0] * 5), np.array([0.0] * 12 + [1.0] * 5)
    exact = sum(math.comb(17, k) for k in range(6)) / 2**17
    assert exact == pytest.approx(0.07173, abs=1e-5)
    assert sign_flip_p(a, b) == pytest.approx(exact, abs=0.004)  # 99,999 random patterns


def test_welch_p_by_hand():
    # a = 1, 2, 3: mean 2, variance 1; b = 0, 0, 1: mean 1/3, variance 1/3
    # se^2 = 1/3 + 1/9 = 4/9, t = (5/3) / (2/3) = 2.5
    # df = (4/9)^2 / ((1/3)^2 / 2 + (1/9)^2 / 2) = 3.2
    a, b = [1.0, 2.0, 3.0], [0.0, 0.0, 1.0]
    assert welch_p(a, b) == pytest.approx(stats.t.sf(2.5, 3.2))
    assert welch_p(b, a, better="lower") == pytest.approx(stats.t.sf(2.5, 3.2))
    assert welch_p(np.ones(3), np.zeros(3)) == 0.0
    assert welch_p(np.zeros(3), np.zeros(3)) == 1.0


def test_welch_p_of_one_constant_sample_by_hand_and_without_a_warning():
    """One constant side (the long curriculum's TTT: Scratch-Reuse's three seeds all
    3.748M, TeLAPA's two 5.122M and 6.371M) has variance 0, which Welch's test allows:
    se^2 = s_b^2 / n_b and df = n_b - 1. scipy warned "Precision loss ... Results may be
    unreliable" there, in every `telapa report` that compared such a sample, though the
    p is exact.

    b = 5.122, 6.371: mean 5.7465, s_b^2 = 2 * 0.6245^2 = 0.7800, se = 0.6245;
    t = (3.748 - 5.7465) / 0.6245 = -3.2001 on 1 df, a Cauchy: P(T < t) = 1/2 +
    arctan(t) / pi = 0.09641."""
    import warnings

    a, b = [3.748] * 3, [5.122, 6.371]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = welch_p(a, b, better="lower")
        reverse = welch_p(b, a, better="lower")
    t = (3.748 - 5.7465) / 0.6245
    assert p == pytest.approx(0.5 + math.atan(t) / math.pi, rel=1e-9)
    assert p == pytest.approx(0.09641, abs=5e-6)
    assert reverse == pytest.approx(1 - p, rel=1e-9)


def test_holm_on_three_p_values_by_hand():
    # sorted 0.01, 0.03, 0.04 -> 3 * 0.01 = 0.03, 2 * 0.03 = 0.06, max(0.06, 1 * 0.04) = 0.06
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    # sorted 0.2, 0.5, 0.9 -> 0.6, min(1, 1.0) = 1, max(1, 0.9) = 1
    assert holm([0.5, 0.2, 0.9]) == pytest.approx([1.0, 0.6, 1.0])
    with pytest.raises(ValueError, match="pvalues"):
        holm([0.1, math.nan])


def test_paired_seeds_to_decide():
    # TeLAPA minus TeLAPA-Static Mean SR per seed in the study (issue 24): mean -0.0088,
    # sd 0.01683, d_z = 0.523. The normal approximation (1.645 + 0.842)^2 / d_z^2 = 22.6;
    # the t distribution's heavier tails add two.
    d = [0.016, -0.004, -0.028, -0.020, -0.008]
    assert paired_seeds_to_decide(d) == 25
    assert paired_seeds_to_decide(d, alpha=0.05 / 9) > 25
    # constant differences: the exact test's floor, 2^-n < alpha (n = 5 at 0.05: 1/32;
    # n = 8 at 0.05 / 9 = 0.0056: 1/256)
    assert paired_seeds_to_decide([0.1, 0.1, 0.1]) == 5
    assert paired_seeds_to_decide([0.1, 0.1, 0.1], alpha=0.05 / 9) == 8
    assert paired_seeds_to_decide([0.1, -0.1]) is None  # no mean difference: never


def test_welch_seeds_to_decide_matches_the_power_tables():
    """Equal unit SDs: Welch's df is 2n - 2 and the runs per method are G*Power's for a
    one-sided two-sample t-test at 0.05 with power 0.8 (d = 0.5: 51, 0.8: 21, 1: 14)."""
    base = np.array([-1.0, 0.0, 1.0])
    assert welch_seeds_to_decide(base + 0.5, base) == 51
    assert welch_seeds_to_decide(base, base + 0.8) == 21
    assert welch_seeds_to_decide(base + 1.0, base) == 14
    assert welch_seeds_to_decide(base, base) is None
    assert welch_seeds_to_decide(np.ones(3), np.zeros(3)) == 2
    assert welch_seeds_to_decide(base + 1e-3, base) is None  # more than 10,000
    # d = 2.5: equal SDs need 3 seeds (df 4, t_.95 = 2.13, delta = 2.5 sqrt(3/2) = 3.06).
    # SDs 1.6 and 0.2 with the same pooled SD sqrt((2.56 + 0.04) / 2): Welch's df at n = 3
    # is 2 * 2.6^2 / (2.56^2 + 0.04^2) = 2.06 (t_.95 = 2.88) for the same delta, too
    # little power, so one more seed
    pooled = math.sqrt((1.6**2 + 0.2**2) / 2)
    assert welch_seeds_to_decide(base + 2.5, base) == 3
    assert welch_seeds_to_decide(1.6 * base + 2.5 * pooled, 0.2 * base) == 4


def test_compare_pairs_by_seed_only_when_the_seeds_agree():
    a = {0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0, 4: 5.0}
    b = {4: 4.0, 3: 3.0, 2: 2.0, 1: 2.5, 0: 0.5}  # order does not matter, seeds do
    c = compare(a, b)
    assert c.paired and c.test == "paired sign-flip, n=5 (exact)"
    assert (c.p, c.p_reverse) == pytest.approx((3 / 32, 31 / 32))
    assert c.seeds_to_decide() == paired_seeds_to_decide(np.subtract(c.a, c.b))
    # a NaN on one side leaves different seeds: Welch over what is there
    b_nan = {**b, 4: math.nan}
    w = compare(a, b_nan)
    assert not w.paired and w.test == "Welch, n=5/4"
    assert w.p == pytest.approx(welch_p(list(a.values()), [0.5, 2.5, 2.0, 3.0]))
    assert w.seeds_to_decide() == welch_seeds_to_decide(w.a, w.b)
    lower = compare(a, b, better="lower")
    assert (lower.p, lower.p_reverse) == pytest.approx((31 / 32, 3 / 32))
    with pytest.raises(ValueError, match="two values"):
        compare({0: 1.0}, b)
