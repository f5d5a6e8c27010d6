"""Aggregates of per-task scores beyond the mean (Agarwal et al. 2021, "Deep RL at the
edge of the statistical precipice"; the rliable library): performance profiles and the
probability of improvement, each with a percentile bootstrap interval.

Scores are ``runs x tasks`` arrays (for the paper's curricula: seeds x revisits, each
cell the success rate after a revisit); a 1-D array is one task. The intervals resample
whole runs by default, or each task's runs independently (rliable's stratified bootstrap):
``resample`` as in `telapa.metrics.stats`, whose docstring says why a continual run
resamples whole.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from telapa.metrics.stats import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    Resample,
    bootstrap_runs,
    enough_to_resample,
    percentile_bootstrap,
    run_matrix,
    strata,
)


def _taus(taus: ArrayLike) -> np.ndarray:
    grid = np.asarray(taus, dtype=float)
    if grid.ndim != 1 or grid.size == 0 or np.isnan(grid).any():
        raise ValueError(f"taus must be a non-empty 1-D array of numbers, got {taus!r}")
    return grid


def _columns(scores: ArrayLike) -> list[np.ndarray]:
    columns = strata(scores)
    if not columns or min(c.size for c in columns) == 0:
        raise ValueError("scores must have at least one task, and a score on every task")
    return columns


def _check_resample(resample: str) -> None:
    if resample not in ("runs", "tasks"):
        raise ValueError(f"resample must be 'runs' or 'tasks', got {resample!r}")


def _above(columns: list[np.ndarray], grid: np.ndarray) -> np.ndarray:
    """Mean over tasks of the fraction of each task's runs (last axis) above each tau:
    shape (taus, ...batch)."""
    per_task = [np.mean(c[..., None, :] > grid[:, None], axis=-1) for c in columns]
    return np.moveaxis(np.mean(per_task, axis=0), -1, 0)


def performance_profile(scores: ArrayLike, *, taus: ArrayLike) -> np.ndarray:
    """The run-score distribution at each tau (rliable's performance profile):

        F(tau) = (1 / M) sum_m (1 / N_m) sum_i [x_{m,i} > tau],

    the fraction of runs whose score on task m exceeds tau, averaged over the M tasks (the
    columns of ``scores``; NaN dropped per task). One value per tau, in [0, 1],
    non-increasing in tau. ValueError when a task has no score.
    """
    return _above(_columns(scores), _taus(taus))


def performance_profile_interval(
    scores: ArrayLike, *, taus: ArrayLike, resample: Resample = "runs",
    confidence: float = 0.95, n_resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[np.ndarray, np.ndarray]:
    """Pointwise percentile bootstrap band (lo, hi) of `performance_profile`, one value per
    tau; NaN with fewer than two runs (stratified: on some task)."""
    grid = _taus(taus)
    _check_resample(resample)
    if resample == "tasks":
        columns = _columns(scores)
        if not enough_to_resample(columns):
            return np.full(grid.shape, math.nan), np.full(grid.shape, math.nan)
        return percentile_bootstrap(columns, lambda *c, axis=-1: _above(list(c), grid),
                                    confidence=confidence, n_resamples=n_resamples,
                                    seed=seed)
    matrix = run_matrix(scores)
    if len(matrix) < 2 or matrix.shape[1] == 0:
        return np.full(grid.shape, math.nan), np.full(grid.shape, math.nan)
    return bootstrap_runs(
        [matrix], lambda m: _above([m[..., j] for j in range(m.shape[-1])], grid),
        confidence=confidence, n_resamples=n_resamples, seed=seed)


def _improvement(xs: list[np.ndarray], ys: list[np.ndarray]) -> np.ndarray:
    """Mean over tasks of U_m / (N_m K_m), runs along the last axis."""
    from scipy import stats  # here, not at the top: see telapa.metrics
    per_task = [stats.mannwhitneyu(x, y, axis=-1, method="asymptotic").statistic
                / (x.shape[-1] * y.shape[-1]) for x, y in zip(xs, ys, strict=True)]
    return np.mean(per_task, axis=0)


def _paired_columns(x: ArrayLike, y: ArrayLike) -> tuple[list[np.ndarray], list[np.ndarray]]:
    xs, ys = _columns(x), _columns(y)
    if len(xs) != len(ys):
        raise ValueError(f"x has {len(xs)} tasks and y has {len(ys)}; they must be the same")
    return xs, ys


def probability_of_improvement(x: ArrayLike, y: ArrayLike) -> float:
    """P(X > Y): the probability that a run of X scores above a run of Y on a task drawn
    uniformly from the tasks (rliable), from the Mann-Whitney U statistic of each task:

        P(X > Y) = (1 / M) sum_m U_m / (N_m K_m),
        U_m = sum_{i, j} S(x_{m,i}, y_{m,j}),   S(a, b) = 1 if a > b, 1/2 if a = b, else 0,

    with N_m and K_m the runs of X and Y on task m (``scipy.stats.mannwhitneyu``'s
    statistic is U_m). ``x`` and ``y`` are ``runs x tasks`` with the same tasks as columns
    (1-D: one task). 0.5 means neither tends to score higher. ValueError when the task
    counts differ or a task has no score.
    """
    return float(_improvement(*_paired_columns(x, y)))


def probability_of_improvement_interval(
    x: ArrayLike, y: ArrayLike, *, resample: Resample = "runs", confidence: float = 0.95,
    n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """Percentile bootstrap interval (lo, hi) of `probability_of_improvement`, the runs of
    X and those of Y resampled independently (whole runs, or each task's runs); NaN with
    fewer than two runs of either (stratified: on some task)."""
    xs, ys = _paired_columns(x, y)
    _check_resample(resample)
    if resample == "tasks":
        if not enough_to_resample([*xs, *ys]):
            return math.nan, math.nan
        n = len(xs)
        lo, hi = percentile_bootstrap(
            [*xs, *ys], lambda *c, axis=-1: _improvement(list(c[:n]), list(c[n:])),
            confidence=confidence, n_resamples=n_resamples, seed=seed)
        return float(lo), float(hi)
    mx, my = run_matrix(x, "x"), run_matrix(y, "y")
    if min(len(mx), len(my)) < 2:
        return math.nan, math.nan
    lo, hi = bootstrap_runs(
        [mx, my], lambda a, b: _improvement([a[..., j] for j in range(a.shape[-1])],
                                            [b[..., j] for j in range(b.shape[-1])]),
        confidence=confidence, n_resamples=n_resamples, seed=seed)
    return float(lo), float(hi)
