"""Intra-task archive structure (paper Sec. "Stepping-Stone Lineages", "Intra-task archive
structure"): normalized novelty of each elite within its task archive.

    nu_i      = min_{j != i} ||z~_i - z~_j||_2
    nu_norm_i = nu_i / (median_i(nu_i) + eps)

The "standardized latent space" is the one the archives store: elite descriptors z~ are
already normalized by the run's global robust normalizer (``elites.csv`` d_0..), so no
further scaling happens here. Choices where the paper is silent: an archive of one elite
has no neighbour (nu_norm NaN); duplicate descriptors give nu = 0 and, if they are the
majority, a median of 0, so the eps denominator then inflates every other value.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from telapa.analysis.data import descriptor_columns

NOVELTY_EPS = 1e-8


def normalized_novelty(z: np.ndarray, eps: float = NOVELTY_EPS) -> np.ndarray:
    """nu_norm of each row of ``z`` (N, d) within that set; N = 1 gives [NaN]."""
    z = np.asarray(z, np.float64)
    if z.ndim != 2:
        raise ValueError(f"z must be (N, d), got shape {z.shape}")
    n = z.shape[0]
    if n < 2:
        return np.full(n, np.nan)
    dist = np.linalg.norm(z[:, None, :] - z[None, :, :], axis=-1)
    np.fill_diagonal(dist, np.inf)
    nu = dist.min(axis=1)
    return nu / (np.median(nu) + eps)


def archive_novelty(elites: pd.DataFrame, *, eps: float = NOVELTY_EPS) -> pd.Series:
    """nu_norm of every elite of one run within its task archive (grouped by ``task``),
    aligned with ``elites``' index."""
    zcols = descriptor_columns(elites, "d")
    out = pd.Series(np.nan, index=elites.index, name="nu_norm")
    for _, group in elites.groupby("task", sort=False):
        out[group.index] = normalized_novelty(group[zcols].to_numpy(float), eps)
    return out


__all__ = ["NOVELTY_EPS", "archive_novelty", "normalized_novelty"]
