"""Aggregates of per-task scores beyond the mean (Agarwal et al. 2021, "Deep RL at the
edge of the statistical precipice"; the rliable library): performance profiles and the
probability of improvement, each with a stratified percentile bootstrap interval.

Scores are ``runs x tasks`` arrays (for the paper's curricula: seeds x revisits, each
cell the success rate after a revisit); NaN marks a missing score and is dropped per task.
The intervals resample each task's runs independently (`telapa.metrics.stats.strata`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from telapa.metrics.stats import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    percentile_bootstrap,
    strata,
)


def _taus(taus: ArrayLike) -> np.ndarray:
    grid = np.asarray(taus, dtype=float)
    if grid.ndim != 1 or grid.size == 0 or np.isnan(grid).any():
        raise ValueError(f"taus must be a non-empty 1-D array of numbers, got {taus!r}")
    return grid


def _profile(grid: np.ndarray):  # noqa: ANN202 (a vectorized scipy statistic)
    def profile(*columns: np.ndarray, axis: int = -1) -> np.ndarray:
        # per task: fraction of its runs above each tau, shape (..., taus); then the
        # mean over tasks, with the taus first (scipy's layout for several outputs)
        above = [np.mean(np.moveaxis(c, axis, -1)[..., None, :] > grid[:, None], axis=-1)
                 for c in columns]
        return np.moveaxis(np.mean(above, axis=0), -1, 0)
    return profile


def performance_profile(scores: ArrayLike, *, taus: ArrayLike) -> np.ndarray:
    """The run-score distribution at each tau (rliable's performance profile):

        F(tau) = (1 / M) sum_m (1 / N_m) sum_i [x_{m,i} > tau],

    the fraction of runs whose score on task m exceeds tau, averaged over the M tasks (the
    columns of ``scores``; a 1-D ``scores`` is one task). One value per tau, in [0, 1],
    non-increasing in tau. Raises ValueError when a task has no score.
    """
    columns = _columns(scores)
    return _profile(_taus(taus))(*columns, axis=-1)


def performance_profile_interval(
    scores: ArrayLike, *, taus: ArrayLike, confidence: float = 0.95,
    n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
) -> tuple[np.ndarray, np.ndarray]:
    """Pointwise stratified percentile bootstrap band (lo, hi) of `performance_profile`
    (`telapa.metrics.stats.percentile_bootstrap` with each task's runs resampled
    independently); NaN where a task has fewer than two runs."""
    return percentile_bootstrap(tuple(_columns(scores)), _profile(_taus(taus)),
                                confidence=confidence, n_resamples=n_resamples, seed=seed)


def _improvement(n_tasks: int):  # noqa: ANN202 (a vectorized scipy statistic)
    def improvement(*columns: np.ndarray, axis: int = -1) -> np.ndarray:
        per_task = [stats.mannwhitneyu(x, y, axis=axis, method="asymptotic").statistic
                    / (x.shape[axis] * y.shape[axis])
                    for x, y in zip(columns[:n_tasks], columns[n_tasks:], strict=True)]
        return np.mean(per_task, axis=0)
    return improvement


def probability_of_improvement(x: ArrayLike, y: ArrayLike) -> float:
    """P(X > Y): the probability that a run of X scores above a run of Y on a task drawn
    uniformly from the tasks (rliable), from the Mann-Whitney U statistic of each task:

        P(X > Y) = (1 / M) sum_m U_m / (N_m K_m),
        U_m = sum_{i, j} S(x_{m,i}, y_{m,j}),   S(a, b) = 1 if a > b, 1/2 if a = b, else 0,

    with N_m and K_m the runs of X and Y on task m (``scipy.stats.mannwhitneyu``'s
    statistic is U_m). ``x`` and ``y`` are ``runs x tasks`` with the same tasks as columns
    (1-D: one task). 0.5 means neither tends to score higher. Raises ValueError when the
    column counts differ or a task has no score.
    """
    xs, ys = _paired_columns(x, y)
    return float(_improvement(len(xs))(*xs, *ys, axis=-1))


def probability_of_improvement_interval(
    x: ArrayLike, y: ArrayLike, *, confidence: float = 0.95,
    n_resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """Stratified percentile bootstrap interval (lo, hi) of `probability_of_improvement`:
    the runs of X and of Y on each task resampled independently (as rliable); NaN when a
    task has fewer than two runs of either."""
    xs, ys = _paired_columns(x, y)
    lo, hi = percentile_bootstrap((*xs, *ys), _improvement(len(xs)), confidence=confidence,
                                  n_resamples=n_resamples, seed=seed)
    return float(lo), float(hi)


def _columns(scores: ArrayLike) -> list[np.ndarray]:
    columns = strata(scores)
    if not columns or min(c.size for c in columns) == 0:
        raise ValueError("scores must have at least one task, and a score on every task")
    return columns


def _paired_columns(x: ArrayLike, y: ArrayLike) -> tuple[list[np.ndarray], list[np.ndarray]]:
    xs, ys = _columns(x), _columns(y)
    if len(xs) != len(ys):
        raise ValueError(f"x has {len(xs)} tasks and y has {len(ys)}; they must be the same")
    return xs, ys
