"""Intervals and robust aggregates over seeds, on scipy.stats.

Two kinds of interval sit side by side in the tables:

- the **Student-t interval** of a mean over n runs (`mean_ci`), the paper's "mean ± 95% CI":
  half width t_{(1+c)/2, n-1} s / sqrt(n) (s the sample SD, ddof = 1). It is symmetric and
  unbounded, so on a success rate with five seeds it can leave [0, 1] (0.600 ± 0.680);
- the **percentile bootstrap interval** (`bootstrap_interval`, Efron & Tibshirani 1993):
  the (1 - c)/2 and (1 + c)/2 quantiles of the statistic over resamples of the data.
  Every resample holds observed values only, so the interval of a mean (or IQM) of values
  in [0, 1] stays in [0, 1]. With few runs it is too narrow (a five-seed bootstrap cannot
  see spread it did not sample); read it beside the t interval, not instead of it.

Scores come as a 1-D array (one value per run) or a 2-D ``runs x tasks`` array (one
column per task, e.g. the success rate after each revisit). A 2-D array is resampled in
one of two ways (``resample``):

- ``"runs"`` (the default): whole rows, each resample drawing n runs with replacement
  and keeping every task of each. This is the bootstrap the continual design calls for:
  one seed's run produces all of its tasks' scores (the same network carried from task to
  task), so the run is the independent unit and its tasks move together;
- ``"tasks"``: each column's runs independently, rliable's stratified bootstrap (Agarwal
  et al. 2021), right when every (task, run) cell is a separate training run, as in the
  Atari benchmarks it was made for. On a continual run it ignores how a seed's tasks
  hang together: positively correlated tasks make it too narrow, negatively correlated
  ones (a seed fast on one revisit, censored on another) too wide.

NaN marks a missing value: a 1-D array drops it, stratified resampling drops it per
column, and resampling whole runs refuses it (a run without a task's score is not a run
of the same design).

The **IQM** (interquartile mean, rliable's headline aggregate) is the mean of the middle
50% of all the values: ``scipy.stats.trim_mean(x, 0.25)``, which cuts floor(0.25 n)
values at each end (IQM of 0..7 is mean(2, 3, 4, 5) = 3.5).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

Statistic = Literal["mean", "iqm"]
Resample = Literal["runs", "tasks"]

BOOTSTRAP_RESAMPLES = 10_000
"""Default resamples of a bootstrap interval. The Monte Carlo error of its 2.5% endpoint
is then sqrt(0.025 * 0.975 / 10^4) / phi(1.96) = 0.027 bootstrap SDs (for a roughly
normal bootstrap distribution): a few thousandths on a success rate."""

BOOTSTRAP_SEED = 0
"""Default seed of the resampling: a report gives the same intervals every time."""


def _finite(values: Iterable[float]) -> np.ndarray:
    x = np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=float)
    return x[~np.isnan(x)]


def mean_ci(values: Iterable[float], confidence: float = 0.95) -> tuple[float, float, int]:
    """(mean, half width, n) of the non-NaN values, the half width of the Student-t interval

        half = t_{(1+c)/2, n-1} * s / sqrt(n),    s = sample SD (ddof = 1).

    n == 1 gives half width NaN; n == 0 gives (NaN, NaN, 0).
    """
    _check_confidence(confidence)
    x = _finite(values)
    n = int(x.size)
    if n == 0:
        return math.nan, math.nan, 0
    mean = float(x.mean())
    if n == 1:
        return mean, math.nan, 1
    s = float(x.std(ddof=1))
    from scipy import stats  # here, not at the top: see telapa.metrics
    return mean, float(stats.t.ppf(0.5 * (1.0 + confidence), n - 1)) * s / math.sqrt(n), n


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def _reduce(statistic: Statistic) -> Callable[[np.ndarray], np.ndarray]:
    """``statistic`` over the last axis (the mean, or scipy's 25% trimmed mean)."""
    from scipy import stats  # here, not at the top: see telapa.metrics
    if statistic == "mean":
        return lambda x: np.mean(x, axis=-1)
    if statistic == "iqm":
        return lambda x: stats.trim_mean(x, 0.25, axis=-1)
    raise ValueError(f"statistic must be 'mean' or 'iqm', got {statistic!r}")


def aggregate(scores: ArrayLike, *, statistic: Statistic = "mean") -> float:
    """``statistic`` ("mean" or "iqm") over every non-NaN value of ``scores`` (any shape,
    flattened); NaN when there is none."""
    reduce = _reduce(statistic)
    x = _finite(np.asarray(scores, dtype=float).ravel())
    return float(reduce(x)) if x.size else math.nan


def iqm(scores: ArrayLike) -> float:
    """Interquartile mean of every non-NaN value of ``scores`` (any shape, flattened):
    ``scipy.stats.trim_mean(x, 0.25)``, the mean after cutting floor(n / 4) values at each
    end. NaN when there is no value."""
    return aggregate(scores, statistic="iqm")


def strata(scores: ArrayLike) -> list[np.ndarray]:
    """The strata of rliable's stratified bootstrap: a 1-D array is one stratum (its
    runs), a 2-D ``runs x tasks`` array one stratum per column (task); NaN dropped."""
    array = np.asarray(scores, dtype=float)
    if array.ndim == 1:
        return [_finite(array)]
    if array.ndim == 2:
        return [_finite(array[:, j]) for j in range(array.shape[1])]
    raise ValueError(f"scores must be 1-D (runs) or 2-D (runs x tasks), got shape {array.shape}")


def run_matrix(scores: ArrayLike, name: str = "scores") -> np.ndarray:
    """``scores`` as a ``runs x tasks`` matrix whose runs can be resampled whole: a 1-D
    array is one task (NaN runs dropped); a 2-D one must have no NaN."""
    array = np.asarray(scores, dtype=float)
    if array.ndim == 1:
        return _finite(array)[:, None]
    if array.ndim != 2:
        raise ValueError(f"{name} must be 1-D (runs) or 2-D (runs x tasks), got shape "
                         f"{array.shape}")
    if np.isnan(array).any():
        rows = sorted(set(np.argwhere(np.isnan(array))[:, 0].tolist()))
        raise ValueError(f"{name} has no value for some task in run(s) {rows}; resampling "
                         "whole runs needs every run's every task")
    return array


def percentile_bootstrap(
    samples: Sequence[np.ndarray],
    statistic: Callable[..., np.ndarray],
    *,
    confidence: float = 0.95,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) percentile interval of a vectorized ``statistic(*samples, axis=-1)`` when
    every sample is resampled with replacement along its last axis, independently of the
    others (``scipy.stats.bootstrap``, method "percentile", ``paired=False``, seeded by
    ``seed``):

        lo, hi = q_{(1-c)/2}, q_{(1+c)/2}    of the statistic over ``n_resamples`` resamples.

    A statistic with several outputs returns them along its first axis; lo and hi have its
    shape. Each sample must hold at least two values (`enough_to_resample`).
    """
    from scipy import stats  # here, not at the top: see telapa.metrics
    _check_confidence(confidence)
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not enough_to_resample(samples):
        raise ValueError("percentile_bootstrap needs at least one sample, each of at least "
                         f"two values; got sizes {[s.shape[-1] for s in samples]}")
    result = stats.bootstrap(tuple(samples), statistic, vectorized=True, paired=False,
                             confidence_level=confidence, n_resamples=n_resamples,
                             method="percentile", rng=np.random.default_rng(seed))
    return (np.asarray(result.confidence_interval.low, dtype=float),
            np.asarray(result.confidence_interval.high, dtype=float))


def enough_to_resample(samples: Sequence[np.ndarray]) -> bool:
    """True when there is a sample and each has two values or more along its last axis."""
    return bool(samples) and min(s.shape[-1] for s in samples) >= 2


def bootstrap_runs(
    matrices: Sequence[np.ndarray],
    statistic: Callable[..., np.ndarray],
    *,
    confidence: float = 0.95,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[np.ndarray, np.ndarray]:
    """`percentile_bootstrap` resampling whole runs: the rows of each ``runs x tasks``
    matrix with replacement (each matrix independently of the others), every task of a
    drawn run kept. ``statistic(*resampled)`` gets arrays of shape (..., runs, tasks) and
    returns the statistic over the last two axes (several outputs along a new first
    axis)."""
    def on_rows(*rows: np.ndarray, axis: int = -1) -> np.ndarray:
        return statistic(*(m[np.moveaxis(r, axis, -1).astype(np.intp)]
                           for m, r in zip(matrices, rows, strict=True)))
    return percentile_bootstrap([np.arange(len(m)) for m in matrices], on_rows,
                                confidence=confidence, n_resamples=n_resamples, seed=seed)


def bootstrap_interval(
    scores: ArrayLike,
    *,
    statistic: Statistic = "mean",
    resample: Resample = "runs",
    confidence: float = 0.95,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """Percentile bootstrap interval (lo, hi) of ``statistic`` ("mean" or "iqm") over all
    the values of ``scores``: each of ``n_resamples`` resamples redraws the data with
    replacement (``resample``: whole runs, or each task's runs independently; module
    docstring), takes the statistic over every value of the resample, and

        lo, hi = q_{(1-c)/2}, q_{(1+c)/2}    of those statistics

    (`percentile_bootstrap`). The interval lies within [min, max] of the values, so in
    [0, 1] for success rates. (NaN, NaN) with fewer than two runs (or, stratified, when a
    task has fewer than two).
    """
    reduce = _reduce(statistic)
    if resample == "tasks":
        samples = strata(scores)
        if not enough_to_resample(samples):
            return math.nan, math.nan
        lo, hi = percentile_bootstrap(
            samples, lambda *s, axis=-1: reduce(np.concatenate(s, axis=axis)),
            confidence=confidence, n_resamples=n_resamples, seed=seed)
    elif resample == "runs":
        matrix = run_matrix(scores)
        if matrix.shape[1] == 0 or len(matrix) < 2:
            return math.nan, math.nan
        lo, hi = bootstrap_runs(
            [matrix], lambda m: reduce(m.reshape(*m.shape[:-2], -1)),
            confidence=confidence, n_resamples=n_resamples, seed=seed)
    else:
        raise ValueError(f"resample must be 'runs' or 'tasks', got {resample!r}")
    return float(lo), float(hi)
