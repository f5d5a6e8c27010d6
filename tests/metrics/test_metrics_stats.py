"""mean_ci and the Student-t quantile against closed forms worked out by hand and scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from telapa.metrics.stats import betainc, mean_ci, t_cdf, t_quantile

# Closed forms: df=1 is Cauchy, t_p = tan(pi (p - 1/2));
#               df=2 has t_p = (2p - 1) / sqrt(2 p (1 - p)).
T975_DF1 = math.tan(math.pi * 0.475)  # 12.706204736...
T975_DF2 = 0.95 / math.sqrt(2 * 0.975 * 0.025)  # 0.95 / sqrt(0.04875) = 4.302652729...


def test_t_quantile_closed_forms():
    assert t_quantile(0.975, 1) == pytest.approx(12.706204736174698, rel=1e-12)
    assert t_quantile(0.975, 1) == pytest.approx(T975_DF1, rel=1e-12)
    assert t_quantile(0.975, 2) == pytest.approx(4.302652729749464, rel=1e-12)
    assert t_quantile(0.975, 2) == pytest.approx(T975_DF2, rel=1e-12)
    assert t_quantile(0.5, 7) == 0.0
    assert t_quantile(0.025, 2) == pytest.approx(-T975_DF2, rel=1e-12)


def test_t_cdf_closed_forms():
    # Cauchy: F(t) = 1/2 + atan(t) / pi;  df=2: F(t) = 1/2 + t / (2 sqrt(2 + t^2)).
    for t in (-5.0, -0.3, 0.0, 1e-8, 0.7, 3.0, 40.0):
        assert t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-14)
        assert t_cdf(t, 2) == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)), abs=1e-14)


def test_betainc_closed_form():
    # I_x(1, b) = 1 - (1 - x)^b and I_x(a, 1) = x^a.
    assert betainc(1.0, 3.0, 0.2) == pytest.approx(1 - 0.8**3, rel=1e-13)
    assert betainc(2.5, 1.0, 0.7) == pytest.approx(0.7**2.5, rel=1e-13)
    assert betainc(2.0, 2.0, 0.0) == 0.0
    assert betainc(2.0, 2.0, 1.0) == 1.0


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 9, 19, 29, 99, 1000, 0.5, 2.5])
@pytest.mark.parametrize("p", [0.6, 0.9, 0.95, 0.975, 0.99, 0.995, 0.9995, 0.025, 1e-4])
def test_t_quantile_matches_scipy(df, p):
    stats = pytest.importorskip("scipy.stats")
    assert t_quantile(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-10)


@pytest.mark.parametrize("df", [1, 3, 19, 250])
def test_t_cdf_matches_scipy(df):
    stats = pytest.importorskip("scipy.stats")
    for t in (-12.0, -2.1, -0.4, 0.0, 0.4, 2.1, 12.0, 300.0):
        assert t_cdf(t, df) == pytest.approx(stats.t.cdf(t, df), abs=1e-13)


def test_t_quantile_rejects_bad_arguments():
    with pytest.raises(ValueError, match="p must"):
        t_quantile(1.0, 3)
    with pytest.raises(ValueError, match="df must"):
        t_quantile(0.9, 0)


def test_mean_ci_n2_by_hand():
    # [1, 3]: mean 2, s = sqrt(((1-2)^2 + (3-2)^2) / 1) = sqrt(2),
    # half = t_{.975,1} * sqrt(2) / sqrt(2) = t_{.975,1} = 12.7062...
    mean, half, n = mean_ci([1.0, 3.0])
    assert (mean, n) == (2.0, 2)
    assert half == pytest.approx(T975_DF1, rel=1e-12)


def test_mean_ci_n3_by_hand():
    # [1, 2, 3]: mean 2, s = sqrt((1 + 0 + 1) / 2) = 1, half = 4.302653 / sqrt(3) = 2.484138
    mean, half, n = mean_ci([1.0, 2.0, 3.0])
    assert (mean, n) == (2.0, 3)
    assert half == pytest.approx(T975_DF2 / math.sqrt(3), rel=1e-12)
    assert half == pytest.approx(2.4841377118, rel=1e-9)


def test_mean_ci_drops_nan_and_reports_n():
    mean, half, n = mean_ci([1.0, math.nan, 3.0])
    assert (mean, n) == (2.0, 2)
    assert half == pytest.approx(T975_DF1, rel=1e-12)


def test_mean_ci_small_n():
    mean, half, n = mean_ci([0.25])
    assert mean == 0.25 and math.isnan(half) and n == 1
    for empty in ([], [math.nan, math.nan]):
        mean, half, n = mean_ci(empty)
        assert math.isnan(mean) and math.isnan(half) and n == 0


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_mean_ci_matches_scipy_interval(confidence):
    stats = pytest.importorskip("scipy.stats")
    x = np.random.default_rng(0).normal(0.5, 0.2, size=20)
    mean, half, n = mean_ci(x, confidence=confidence)
    lo, hi = stats.t.interval(confidence, df=19, loc=x.mean(), scale=stats.sem(x))
    assert n == 20
    assert mean == pytest.approx(x.mean(), rel=1e-12)
    assert half == pytest.approx((hi - lo) / 2, rel=1e-10)


def test_mean_ci_rejects_bad_confidence():
    with pytest.raises(ValueError, match="confidence"):
        mean_ci([1.0, 2.0], confidence=95)
