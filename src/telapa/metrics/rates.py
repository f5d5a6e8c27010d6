"""Success rates as the counts they are: k successes of n episodes, kept and compared as
the rational k / n.

An evaluation of n episodes of which k succeed has SR = k / n exactly. Stored as float32
(as runs once stored every SR), 45/50 reads 0.8999999761581421, which misses tau = 0.9,
and the sum of such values loses exact ties. So every metric (`telapa.metrics.continual`)
and every paired test (`telapa.metrics.comparisons`) works on exact rationals:

- `as_exact(x)`: a ``Fraction``/``int`` as it is; a float as the shortest decimal that
  reads back as it (``0.9`` -> 9/10, as a user means a tau of 0.9);
- `exact_rate(sr, successes, episodes)`: k / n where the counts are known, else
  ``as_exact(sr)`` (a competence that is no count, MuJoCo's SR~, is the float it is);
- `recover_successes(sr, episodes)`: for tables written before runs kept the counts,
  k = round(sr x n), refused (None) unless k / n reads back as ``sr`` in float32, the
  precision it was stored in, or float64.
"""

from __future__ import annotations

import math
from fractions import Fraction
from numbers import Rational

import numpy as np
import pandas as pd


def as_exact(x: Rational | float) -> Fraction:
    """``x`` as a `Fraction`: a rational exactly; a float as the shortest decimal that
    reads back as it (``repr``), so ``0.9`` is 9/10. ValueError for NaN or infinity."""
    if isinstance(x, Rational):
        return Fraction(x)
    value = float(x)
    if not math.isfinite(value):
        raise ValueError(f"{value} has no exact value")
    return Fraction(repr(value))


def recover_successes(sr: float, episodes: int) -> int | None:
    """k with k / ``episodes`` == ``sr`` as stored (float32 or float64); None when no k
    reads back as ``sr`` (the value is not a rate of ``episodes`` episodes)."""
    n = int(episodes)
    if n <= 0:
        raise ValueError(f"episodes must be positive, got {episodes}")
    value = float(sr)
    if not math.isfinite(value) or not -0.5 / n <= value <= 1.0 + 0.5 / n:
        return None
    k = round(value * n)
    if not 0 <= k <= n:
        return None
    stored32 = float(np.float32(value)) == value  # the value is a float32
    if k / n == value or (stored32 and np.float32(k / n) == np.float32(value)):
        return k
    return None


def exact_rate(sr: float, successes: float | None = None,
               episodes: float | None = None) -> Fraction:
    """k / n when ``successes`` (k) and ``episodes`` (n) are given (not None or NaN), else
    `as_exact` of ``sr``."""
    if _given(successes) and _given(episodes):
        return Fraction(int(successes), int(episodes))
    return as_exact(sr)


def _given(x: object) -> bool:
    return x is not None and not pd.isna(x)


__all__ = ["as_exact", "exact_rate", "recover_successes"]
