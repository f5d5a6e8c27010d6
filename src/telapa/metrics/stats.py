"""Mean and Student-t confidence interval over seeds, without scipy.

Choices where the paper is silent ("mean ± 95% CI" over 20 runs):
- Half width = t_{(1+c)/2, n-1} * s / sqrt(n), with s the sample std (ddof=1).
- NaN values (e.g. an undefined nBWT) are dropped first; the n actually used is returned.
- n == 1 gives half width NaN; n == 0 gives (NaN, NaN, 0).
- The t quantile inverts the t CDF, written with the regularized incomplete beta function
  (continued fraction, Numerical Recipes `betacf`), by bisection to float precision.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

_MAX_ITER = 500
_TINY = 1e-300


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of I_x(a, b) (modified Lentz), valid for x < (a+1)/(a+b+2)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _MAX_ITER + 1):
        m2 = 2 * m
        for aa in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + aa / c
            c = c if abs(c) > _TINY else _TINY
            delta = d * c
            h *= delta
        if abs(delta - 1.0) < 1e-15:
            return h
    raise ArithmeticError(f"incomplete beta continued fraction did not converge (a={a}, b={b})")


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) = B(x; a, b) / B(a, b), for a, b > 0."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """Student-t CDF: P(T <= t) = 1 - I_{df/(df+t^2)}(df/2, 1/2) / 2 for t >= 0 (symmetric).

    Near the centre (t^2 < df) the equivalent 1/2 + I_{t^2/(df+t^2)}(1/2, df/2) / 2 is used,
    which avoids the cancellation in 1 - t^2/(df+t^2).
    """
    if df <= 0:
        raise ValueError(f"df must be > 0, got {df}")
    t2 = t * t
    if t2 < df:
        tail = 0.5 - 0.5 * betainc(0.5, 0.5 * df, t2 / (df + t2))
    else:
        tail = 0.5 * betainc(0.5 * df, 0.5, df / (df + t2))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """Inverse Student-t CDF t_{p, df}: the t with t_cdf(t, df) = p, found by bisection."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if df <= 0:
        raise ValueError(f"df must be > 0, got {df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if p == 0.5:
        return 0.0
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, 2.0 * hi
    for _ in range(_MAX_ITER):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def mean_ci(values: Iterable[float], confidence: float = 0.95) -> tuple[float, float, int]:
    """(mean, half width, n) of the non-NaN values; half = t_{(1+c)/2, n-1} * s / sqrt(n)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    x = np.asarray(list(values), dtype=float)
    x = x[~np.isnan(x)]
    n = int(x.size)
    if n == 0:
        return math.nan, math.nan, 0
    mean = float(x.mean())
    if n == 1:
        return mean, math.nan, 1
    s = float(x.std(ddof=1))
    return mean, t_quantile(0.5 * (1.0 + confidence), n - 1) * s / math.sqrt(n), n
