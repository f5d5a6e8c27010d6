"""Intervals and robust aggregates over seeds, on scipy.stats.

Two kinds of interval sit side by side in the tables:

- the **Student-t interval** of a mean over n runs (`mean_ci`), the paper's "mean ± 95% CI":
  half width t_{(1+c)/2, n-1} s / sqrt(n) (s the sample SD, ddof = 1). It is symmetric and
  unbounded, so on a success rate with five seeds it can leave [0, 1] (0.600 ± 0.680);
- the **percentile bootstrap interval** (`bootstrap_interval`, Efron & Tibshirani 1993;
  stratified as in rliable, Agarwal et al. 2021): the (1 - c)/2 and (1 + c)/2 quantiles of
  the statistic over resamples of the data. Every resample holds observed values only, so
  the interval of a mean (or IQM) of values in [0, 1] stays in [0, 1]. With few runs it is
  too narrow (a five-seed bootstrap cannot see spread it did not sample); read it beside
  the t interval, not instead of it.

Scores come as a 1-D array (one value per run: resampled over runs) or a 2-D array
``runs x tasks`` (one column per task: each column resampled over its runs independently,
the stratified bootstrap, so every resample keeps every task). NaN marks a missing value
and is dropped first, per column.

The **IQM** (interquartile mean, rliable's headline aggregate) is the mean of the middle
50% of all the values: ``scipy.stats.trim_mean(x, 0.25)``, which cuts
floor(0.25 n) values at each end (IQM of 0..7 is mean(2, 3, 4, 5) = 3.5).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

Statistic = Literal["mean", "iqm"]

BOOTSTRAP_RESAMPLES = 10_000
"""Default resamples of `bootstrap_interval`: the endpoints' Monte Carlo error is then
about 0.005 on a [0, 1] scale for five seeds."""

BOOTSTRAP_SEED = 0
"""Default seed of the resampling: a report gives the same intervals every time."""


def _finite(values: Iterable[float]) -> np.ndarray:
    x = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float)
    return x[~np.isnan(x)]


def mean_ci(values: Iterable[float], confidence: float = 0.95) -> tuple[float, float, int]:
    """(mean, half width, n) of the non-NaN values, the half width of the Student-t interval

        half = t_{(1+c)/2, n-1} * s / sqrt(n),    s = sample SD (ddof = 1).

    n == 1 gives half width NaN; n == 0 gives (NaN, NaN, 0).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    x = _finite(values)
    n = int(x.size)
    if n == 0:
        return math.nan, math.nan, 0
    mean = float(x.mean())
    if n == 1:
        return mean, math.nan, 1
    s = float(x.std(ddof=1))
    return mean, float(stats.t.ppf(0.5 * (1.0 + confidence), n - 1)) * s / math.sqrt(n), n


def iqm(scores: ArrayLike) -> float:
    """Interquartile mean of every non-NaN value of ``scores`` (any shape, flattened):
    ``scipy.stats.trim_mean(x, 0.25)``, the mean after cutting floor(n / 4) values at each
    end. NaN when there is no value."""
    return aggregate(scores, "iqm")


def strata(scores: ArrayLike) -> list[np.ndarray]:
    """The resampling strata of ``scores``: a 1-D array is one stratum (its runs), a 2-D
    ``runs x tasks`` array one stratum per column (task); NaN dropped in each."""
    array = np.asarray(scores, dtype=float)
    if array.ndim == 1:
        return [_finite(array)]
    if array.ndim == 2:
        return [_finite(array[:, j]) for j in range(array.shape[1])]
    raise ValueError(f"scores must be 1-D (runs) or 2-D (runs x tasks), got shape {array.shape}")


def _pooled(statistic: Statistic) -> Callable[..., np.ndarray]:
    """A vectorized statistic of several strata: ``statistic`` over their union."""
    if statistic not in ("mean", "iqm"):
        raise ValueError(f"statistic must be 'mean' or 'iqm', got {statistic!r}")

    def pooled(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
        union = np.concatenate(samples, axis=axis)
        if statistic == "mean":
            return np.mean(union, axis=axis)
        return stats.trim_mean(union, 0.25, axis=axis)
    return pooled


def aggregate(scores: ArrayLike, statistic: Statistic = "mean") -> float:
    """``statistic`` ("mean" or "iqm") over every non-NaN value of ``scores`` (any shape,
    flattened); NaN when there is none."""
    pooled = _pooled(statistic)
    x = _finite(np.asarray(scores, dtype=float).ravel())
    return float(pooled(x, axis=-1)) if x.size else math.nan


def percentile_bootstrap(
    samples: tuple[np.ndarray, ...],
    statistic: Callable[..., np.ndarray],
    *,
    confidence: float = 0.95,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) percentile interval of a vectorized ``statistic(*samples, axis=-1)`` when
    every sample is resampled with replacement, independently of the others
    (``scipy.stats.bootstrap``, method "percentile", ``paired=False``, seeded by ``seed``):

        lo, hi = q_{(1-c)/2}, q_{(1+c)/2}    of the statistic over ``n_resamples`` resamples.

    A statistic with several outputs returns them along its first axis; lo and hi have its
    shape. NaN when a sample has fewer than two values (nothing to resample).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not samples:
        raise ValueError("percentile_bootstrap needs at least one sample")
    if min(s.size for s in samples) < 2:
        shape = np.shape(statistic(*(np.zeros(2),) * len(samples), axis=-1))
        return np.full(shape, math.nan), np.full(shape, math.nan)
    result = stats.bootstrap(samples, statistic, vectorized=True, paired=False,
                             confidence_level=confidence, n_resamples=n_resamples,
                             method="percentile", rng=np.random.default_rng(seed))
    return (np.asarray(result.confidence_interval.low, dtype=float),
            np.asarray(result.confidence_interval.high, dtype=float))


def bootstrap_interval(
    scores: ArrayLike,
    *,
    statistic: Statistic = "mean",
    confidence: float = 0.95,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """Percentile bootstrap interval (lo, hi) of ``statistic`` ("mean" or "iqm") over
    ``scores``: each resample draws, with replacement, as many runs as each stratum has
    (`strata`: the runs of a 1-D array, or each task's runs of a 2-D one, independently),
    takes the statistic over the union of the resampled strata, and

        lo, hi = q_{(1-c)/2}, q_{(1+c)/2}    of those ``n_resamples`` statistics

    (`percentile_bootstrap`). The interval lies within [min, max] of the values, so in
    [0, 1] for success rates. (NaN, NaN) when a stratum has fewer than two values.
    """
    samples = tuple(strata(scores))
    if not samples:
        return math.nan, math.nan
    lo, hi = percentile_bootstrap(samples, _pooled(statistic),
                                  confidence=confidence, n_resamples=n_resamples, seed=seed)
    return float(lo), float(hi)
