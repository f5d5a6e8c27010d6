"""Geometry diagnostics on hand-made archives (arithmetic in comments)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from telapa.analysis.data import TeLAPARun
from telapa.analysis.geometry import (
    centroid_distances,
    centroids,
    mean_separation,
    rms_radius,
    separation_ratio,
    tsne_embedding,
)

# A: (0,0), (2,0) -> c_A = (1,0), R_A = sqrt((1 + 1) / 2) = 1.
# B: (4,3), (4,5), (3,4), (5,4) -> c_B = (4,4), every squared distance 1 -> R_B = 1.
# C: (1,0) alone -> c_C = (1,0), R_C = 0.
# D_AB = ||(3,4)|| = 5, D_AC = 0, D_BC = 5.
# S_AB = 5 / sqrt(1 + 1) = 3.5355..., S_AC = 0, S_BC = 5 / sqrt(1 + 0) = 5.
Z = np.array([[4, 3], [0, 0], [4, 5], [1, 0], [3, 4], [2, 0], [5, 4]], dtype=float)
LABELS = ["B", "A", "B", "C", "B", "A", "B"]


def test_centroids_and_distances() -> None:
    c = centroids(Z, LABELS)
    assert list(c.index) == ["B", "A", "C"]  # first-appearance order
    np.testing.assert_allclose(c.to_numpy(), [[4, 4], [1, 0], [1, 0]])
    d = centroid_distances(Z, LABELS)
    np.testing.assert_allclose(d.loc["A", "B"], 5.0)
    np.testing.assert_allclose(d.loc["A", "C"], 0.0)
    np.testing.assert_allclose(d.to_numpy(), d.to_numpy().T)


def test_rms_radius() -> None:
    np.testing.assert_allclose(rms_radius(Z, LABELS)[["A", "B", "C"]], [1.0, 1.0, 0.0])
    # (0,0), (0,3): c = (0, 1.5), squared distances 2.25, 2.25 -> R = 1.5
    assert rms_radius(np.array([[0.0, 0], [0, 3]]), ["X", "X"])["X"] == pytest.approx(1.5)


def test_separation_ratio() -> None:
    s = separation_ratio(Z, LABELS, eps=0.0)
    assert s.loc["A", "B"] == pytest.approx(5 / math.sqrt(2))
    assert s.loc["B", "C"] == pytest.approx(5.0)
    assert s.loc["A", "C"] == 0.0
    assert np.diag(s.to_numpy()).tolist() == [0.0, 0.0, 0.0]
    # eps enters the denominator: 5 / (1 + 0.5)
    assert separation_ratio(Z, LABELS, eps=0.5).loc["B", "C"] == pytest.approx(5 / 1.5)
    # two single-point groups: R = 0 on both sides, S is NaN rather than D / eps
    pair = separation_ratio(np.array([[0.0, 0.0], [3.0, 4.0]]), ["P", "Q"])
    assert np.isnan(pair.loc["P", "Q"]) and pair.loc["P", "P"] == 0.0
    with pytest.raises(ValueError, match="one label per row"):
        separation_ratio(Z, LABELS[:-1])


def run_with(points: dict[str, list[tuple[float, float]]], seed: int) -> TeLAPARun:
    """A run whose archives hold ``points`` (task -> descriptors), one visit per task."""
    tasks = list(points)
    visits = pd.DataFrame({"visit": range(len(tasks)), "tag": tasks, "task": tasks})
    rows = [(task, v, x, y) for v, task in enumerate(tasks) for x, y in points[task]]
    elites = pd.DataFrame(rows, columns=["task", "visit", "d_0", "d_1"])
    final = pd.DataFrame({"task": tasks, "sr": 0.5})
    return TeLAPARun(Path(f"run{seed}"), "test", "telapa", seed, visits, final, elites, [])


def test_mean_separation_over_runs() -> None:
    # run 0: A (0,0),(0,2): c (0,1), R 1; B (0,5),(0,7): c (0,6), R 1 -> S_AB = 5/sqrt(2)
    # run 1: B (0,10),(0,12): c (0,11) -> S_AB = 10/sqrt(2); C (1,1),(3,1): c (2,1), R 1,
    #        D_AC = 2 -> S_AC = 2/sqrt(2) (run 1 only)
    # mean S_AB = (5 + 10) / 2 / sqrt(2) = 7.5/sqrt(2)
    run0 = run_with({"A": [(0, 0), (0, 2)], "B": [(0, 5), (0, 7)]}, 0)
    run1 = run_with({"A": [(0, 0), (0, 2)], "B": [(0, 10), (0, 12)], "C": [(1, 1), (3, 1)]}, 1)
    s = mean_separation([run0, run1], eps=0.0)
    assert list(s.index) == ["A", "B", "C"]
    assert s.loc["A", "B"] == pytest.approx(7.5 / math.sqrt(2))
    assert s.loc["A", "C"] == pytest.approx(2 / math.sqrt(2))
    assert s.loc["C", "A"] == s.loc["A", "C"]
    assert mean_separation([]).empty


def test_tsne_small_cases() -> None:
    assert tsne_embedding(np.zeros((0, 3)), seed=0).shape == (0, 2)
    np.testing.assert_array_equal(tsne_embedding(np.ones((1, 3)), seed=0), [[0.0, 0.0]])
    # two points 5 apart: (-2.5, 0), (2.5, 0)
    np.testing.assert_allclose(tsne_embedding(np.array([[0.0, 0], [3, 4]]), seed=0),
                               [[-2.5, 0.0], [2.5, 0.0]])


def test_tsne_keeps_separated_clusters_apart() -> None:
    rng = np.random.default_rng(0)
    z = np.concatenate([rng.normal(0, 0.1, (12, 8)), rng.normal(20, 0.1, (12, 8))])
    xy = tsne_embedding(z, seed=3)
    assert xy.shape == (24, 2) and np.isfinite(xy).all()
    gap = np.linalg.norm(xy[:12].mean(0) - xy[12:].mean(0))
    spread = max(np.linalg.norm(xy[:12] - xy[:12].mean(0), axis=1).max(),
                 np.linalg.norm(xy[12:] - xy[12:].mean(0), axis=1).max())
    assert gap > 2 * spread
    np.testing.assert_allclose(tsne_embedding(z, seed=3), xy)  # seeded: reproducible
