"""Cross-task geometry in the shared behavior space (paper App. "Geometry diagnostics in
the shared behavior space"), over the archived elites z~ of each task archive k:

    c_k    = (1/N_k) sum_i z~_{k,i}                      (centroid)
    D_kl   = ||c_k - c_l||_2                              (centroid distance)
    R_k    = sqrt((1/N_k) sum_i ||z~_{k,i} - c_k||^2)     (RMS radius)
    S_kl   = D_kl / (sqrt(R_k^2 + R_l^2) + eps)           (separation ratio)

Latent coordinates are run-dependent, so coordinates are never pooled across runs; the
scalar statistics are (`mean_separation`, `elementwise_mean`).

Choices where the paper is silent: eps = 1e-8; tasks are the per-task archives (``elites.family``)
in curriculum order; S_kk = 0; S_kl is NaN when both archives hold a single elite
(R_k = R_l = 0: the ratio would only measure eps) and such cells are left out of the mean
over runs; t-SNE as in `tsne_embedding`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from telapa.analysis.data import TeLAPARun, descriptor_columns, elites_with_tags, family_order

GEOMETRY_EPS = 1e-8


def _groups(z: np.ndarray, labels: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    z = np.asarray(z, np.float64)
    labels = list(labels)
    if z.ndim != 2 or z.shape[0] != len(labels):
        raise ValueError(f"z must be (N, d) with one label per row; got {z.shape}, "
                         f"{len(labels)} labels")
    return z, list(dict.fromkeys(labels))


def centroids(z: np.ndarray, labels: Sequence[str]) -> pd.DataFrame:
    """c_k: one row per label (first-appearance order), columns z_0..z_{d-1}."""
    z, order = _groups(z, labels)
    lab = np.asarray(labels, dtype=object)
    c = np.stack([z[lab == k].mean(axis=0) for k in order]) if order else np.zeros((0, 0))
    return pd.DataFrame(c, index=pd.Index(order, name="task"),
                        columns=[f"z_{j}" for j in range(c.shape[1])])


def centroid_distances(z: np.ndarray, labels: Sequence[str]) -> pd.DataFrame:
    """D_kl = ||c_k - c_l||_2, a label x label frame."""
    c = centroids(z, labels)
    x = c.to_numpy()
    d = np.linalg.norm(x[:, None, :] - x[None, :, :], axis=-1)
    return pd.DataFrame(d, index=c.index, columns=c.index.rename(None))


def rms_radius(z: np.ndarray, labels: Sequence[str]) -> pd.Series:
    """R_k = sqrt(mean_i ||z~_{k,i} - c_k||^2) per label."""
    z, order = _groups(z, labels)
    lab = np.asarray(labels, dtype=object)
    r = [np.sqrt(((z[lab == k] - z[lab == k].mean(axis=0)) ** 2).sum(axis=1).mean())
         for k in order]
    return pd.Series(r, index=pd.Index(order, name="task"), name="rms_radius", dtype=float)


def separation_ratio(
    z: np.ndarray, labels: Sequence[str], *, eps: float = GEOMETRY_EPS
) -> pd.DataFrame:
    """S_kl = D_kl / (sqrt(R_k^2 + R_l^2) + eps), a label x label frame (S_kk = 0; NaN
    between two single-point groups, where R_k = R_l = 0)."""
    d = centroid_distances(z, labels)
    r = rms_radius(z, labels).to_numpy()
    spread = np.sqrt(r[:, None] ** 2 + r[None, :] ** 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        s = np.where(spread > 0, d.to_numpy() / (spread + eps), np.nan)
    np.fill_diagonal(s, 0.0)
    return pd.DataFrame(s, index=d.index, columns=d.columns)


def run_descriptors(run: TeLAPARun) -> tuple[np.ndarray, list[str]]:
    """(z~ of every archived elite, its family), elites sorted in curriculum family order."""
    elites = elites_with_tags(run)
    rank = {f: i for i, f in enumerate(family_order(run.visits))}
    elites = elites.iloc[np.argsort(elites["family"].map(rank).to_numpy(), kind="stable")]
    return elites[descriptor_columns(elites, "d")].to_numpy(float), list(elites["family"])


def elementwise_mean(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Cell-wise mean of task x task frames over those that have the cell (finite);
    tasks in first-seen order."""
    if not frames:
        return pd.DataFrame(dtype=float)
    order = list(dict.fromkeys(k for f in frames for k in f.index))
    stacked = np.stack([f.reindex(index=order, columns=order).to_numpy(float) for f in frames])
    counts = np.isfinite(stacked).sum(axis=0)
    total = np.where(np.isfinite(stacked), stacked, 0.0).sum(axis=0)
    mean = np.where(counts > 0, total / np.maximum(counts, 1), np.nan)
    return pd.DataFrame(mean, index=pd.Index(order, name="task"), columns=order)


def mean_separation(runs: Sequence[TeLAPARun], *, eps: float = GEOMETRY_EPS) -> pd.DataFrame:
    """Element-wise mean of S_kl over the runs whose archives include both k and l
    (tasks in first-seen curriculum order across ``runs``)."""
    return elementwise_mean([separation_ratio(*run_descriptors(run), eps=eps) for run in runs])


def tsne_embedding(z: np.ndarray, *, seed: int) -> np.ndarray:
    """2-D t-SNE of ``z`` (N, d) (scikit-learn, PCA init for d >= 2, ``random_state=seed``).

    Perplexity = min(30, (N - 1) / 3) (it must stay below N). N < 3 is not embedded:
    one point sits at the origin, two at (-/+ ||z_1 - z_0|| / 2, 0). Runs on one thread:
    the Barnes-Hut gradient's OpenMP threads otherwise stall on shared cores.
    """
    z = np.asarray(z, np.float64)
    if z.ndim != 2:
        raise ValueError(f"z must be (N, d), got shape {z.shape}")
    n = z.shape[0]
    if n < 3:
        out = np.zeros((n, 2))
        if n == 2:
            half = 0.5 * float(np.linalg.norm(z[1] - z[0]))
            out[:, 0] = (-half, half)
        return out
    # here, not at the top: scikit-learn takes a second to import, which every report
    # (and every process importing telapa.analysis) paid, t-SNE panel or not
    from sklearn.manifold import TSNE
    from threadpoolctl import threadpool_limits

    tsne = TSNE(n_components=2, perplexity=min(30.0, (n - 1) / 3),
                init="pca" if z.shape[1] >= 2 else "random", random_state=seed)
    with threadpool_limits(1):
        return np.asarray(tsne.fit_transform(z), np.float64)


__all__ = [
    "GEOMETRY_EPS",
    "centroid_distances",
    "centroids",
    "elementwise_mean",
    "mean_separation",
    "rms_radius",
    "run_descriptors",
    "separation_ratio",
    "tsne_embedding",
]
