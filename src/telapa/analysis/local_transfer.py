"""Local transfer statistics (paper Sec. "Local transfer reveals failure mode of
single-model preservation"): is the source-best elite also the transfer-best one?

A pair s -> t is one transfer (target visit t of one run) and one source archive s: the
candidates C_{s->t} are the probed candidates of that transfer whose source visit belongs
to task family s (the per-task archive they were drawn from, ``source_family``). For each
candidate: source fitness f_i (``fitness``), target performance y_i (``y`` = SR after the
few-shot probe) and latent descriptor z_i (``z_*``).

    pi*      = argmax_{C} f_i               (source-best; ties: first in probe order)
    G        = {i : f_i >= gamma f*}         (good-enough set; (2 - gamma) f* if f* < 0)
    d_i      = ||z_i - z*||_2
    rho_i    = rank of d_i within G / (|G| - 1)          (0 closest ... 1 farthest)
    B        = {i in G : rho_i <= tau}       (competent local basin)
    Delta_good  = max_G y - y(pi*)
    Span_0.75   = Q_0.75({d_i : i in G}) / max_C d_j
    delta_i     = y_i - y(pi*),  i in B \\ {pi*}
    Delta_local = max_B y - y(pi*)

Choices where the paper is silent:
- Negative f*: gamma f* > f* would drop pi* from its own good-enough set, so the threshold
  is f* - (1 - gamma)|f*| = (2 - gamma) f* (the same relative slack below f*). MiniGrid
  returns lie in [0, 1]; with f* = 0 (every candidate failed) G is every candidate with
  f_i = 0.
- Ranks are ordinal: ties in d are broken with pi* first, then by probe order. pi* has
  d = 0 and rho = 0; a single-element G gives rho = 0.
- pi* belongs to G and B, so Delta_good, Delta_local >= 0; delta_i leaves pi* out (it is the
  reference, delta = 0 by definition).
- Pairs with fewer than 2 candidates carry no local information: their Delta_good,
  Span_0.75 and Delta_local are NaN (excluded from summaries, which count them).
- Span_0.75 is NaN when every candidate sits at z* (0/0).
- Q_0.75 is numpy's percentile with linear interpolation (``method="linear"``).
- delta_i rank bins: ``bins`` equal-width, right-closed intervals of (0, tau].
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from telapa.analysis.data import descriptor_columns

PAIR_KEYS = ("target_visit", "target", "source_family")
"""Columns naming a pair s -> t within one run."""
STATISTICS = ("delta_good", "span_75", "delta_local")


def _check(candidates: pd.DataFrame, gamma: float, tau: float) -> list[str]:
    if not 0.0 < gamma <= 1.0:
        raise ValueError(f"gamma must be in (0, 1], got {gamma}")
    if not 0.0 <= tau <= 1.0:
        raise ValueError(f"tau must be in [0, 1], got {tau}")
    missing = [c for c in (*PAIR_KEYS, "elite_id", "fitness", "y") if c not in candidates]
    if missing:
        raise ValueError(f"candidates frame is missing column(s) {missing}")
    zcols = descriptor_columns(candidates, "z")
    if not zcols:
        raise ValueError("candidates frame has no descriptor columns z_0..")
    return zcols


def competent_basin(
    f: np.ndarray, z: np.ndarray, *, gamma: float, tau: float
) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """(star, good, d, rho) of one pair: pi*'s position, the G mask, d_i for every
    candidate and rho_i (NaN outside G). B is ``rho <= tau``."""
    star = int(np.argmax(f))
    f_star = float(f[star])
    good = f >= (gamma if f_star >= 0 else 2.0 - gamma) * f_star
    d = np.linalg.norm(z - z[star], axis=1)
    idx = np.flatnonzero(good)
    order = idx[np.lexsort((idx, idx != star, d[idx]))]
    rho = np.full(len(f), np.nan)
    rho[order] = np.arange(len(order)) / max(len(order) - 1, 1)
    return star, good, d, rho


def pair_statistics(
    candidates: pd.DataFrame, *, gamma: float = 0.9, tau: float = 0.5
) -> pd.DataFrame:
    """One row per pair s -> t of one run: n_candidates, n_good, n_basin, f_star, y_star and
    Delta_good, Span_0.75, Delta_local (NaN for pairs of fewer than 2 candidates)."""
    zcols = _check(candidates, gamma, tau)
    keys = list(PAIR_KEYS)
    rows = []
    for key, group in candidates.groupby(keys, sort=False):
        f, y = group["fitness"].to_numpy(float), group["y"].to_numpy(float)
        star, good, d, rho = competent_basin(
            f, group[zcols].to_numpy(float), gamma=gamma, tau=tau
        )
        basin = rho <= tau
        row = dict(zip(keys, key, strict=True))
        row.update(n_candidates=len(group), n_good=int(good.sum()), n_basin=int(basin.sum()),
                   f_star=f[star], y_star=y[star])
        if len(group) < 2:
            row.update(dict.fromkeys(STATISTICS, np.nan))
        else:
            d_max = d.max()
            q75 = np.percentile(d[good], 75, method="linear")
            row.update(
                delta_good=y[good].max() - y[star],
                span_75=q75 / d_max if d_max > 0 else np.nan,
                delta_local=y[basin].max() - y[star],
            )
        rows.append(row)
    columns = [*keys, "n_candidates", "n_good", "n_basin", "f_star", "y_star", *STATISTICS]
    return pd.DataFrame(rows, columns=columns)


def rank_bin_labels(*, tau: float, bins: int) -> list[str]:
    """Labels of the delta_i rank bins: right-closed equal-width intervals of (0, tau]."""
    edges = np.linspace(0.0, tau, bins + 1)
    return [f"({lo:.2f}, {hi:.2f}]" for lo, hi in zip(edges[:-1], edges[1:], strict=True)]


def local_deltas(
    candidates: pd.DataFrame, *, gamma: float = 0.9, tau: float = 0.5, bins: int = 4
) -> pd.DataFrame:
    """One row per candidate of B \\ {pi*}: its pair, elite_id, d, rho, y, delta_i =
    y_i - y(pi*) and ``rank_bin`` (index of its rho interval, see `rank_bin_labels`)."""
    zcols = _check(candidates, gamma, tau)
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    keys = list(PAIR_KEYS)
    edges = np.linspace(0.0, tau, bins + 1)
    rows = []
    for key, group in candidates.groupby(keys, sort=False):
        y = group["y"].to_numpy(float)
        star, _, d, rho = competent_basin(
            group["fitness"].to_numpy(float), group[zcols].to_numpy(float), gamma=gamma, tau=tau
        )
        for i in np.flatnonzero(rho <= tau):
            if i == star:
                continue
            b = int(np.clip(np.searchsorted(edges, rho[i], side="left") - 1, 0, bins - 1))
            rows.append({**dict(zip(keys, key, strict=True)),
                         "elite_id": group["elite_id"].iloc[i], "d": d[i], "rho": rho[i],
                         "y": y[i], "delta": y[i] - y[star], "rank_bin": b})
    return pd.DataFrame(rows, columns=[*keys, "elite_id", "d", "rho", "y", "delta", "rank_bin"])


def summarize_pairs(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per statistic over pairs: n (pairs used), n_excluded (pairs of < 2 candidates),
    mean, median, q25, q75 and frac_positive (share of pairs > 0; NaN for Span_0.75)."""
    n_excluded = int((pairs["n_candidates"] < 2).sum()) if len(pairs) else 0
    rows = {}
    for name in STATISTICS:
        x = pairs[name].to_numpy(float) if len(pairs) else np.zeros(0)
        x = x[np.isfinite(x)]
        empty = x.size == 0
        rows[name] = {
            "n": int(x.size), "n_excluded": n_excluded,
            "mean": np.nan if empty else float(x.mean()),
            "median": np.nan if empty else float(np.median(x)),
            "q25": np.nan if empty else float(np.percentile(x, 25)),
            "q75": np.nan if empty else float(np.percentile(x, 75)),
            "frac_positive": np.nan if empty or name == "span_75" else float((x > 0).mean()),
        }
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("statistic")


__all__ = [
    "PAIR_KEYS",
    "STATISTICS",
    "competent_basin",
    "local_deltas",
    "pair_statistics",
    "rank_bin_labels",
    "summarize_pairs",
]
