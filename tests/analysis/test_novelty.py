"""Normalized novelty nu_norm on hand-made descriptors (arithmetic in comments)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from telapa.analysis.novelty import archive_novelty, normalized_novelty

# Nearest neighbours: (0,0) -> (1,0): 1; (1,0) -> (0,0): 1; (3,0) -> (1,0): 2;
# (3,4) -> (3,0): 4. nu = [1, 1, 2, 4], median = (1 + 2) / 2 = 1.5.
Z = np.array([[0.0, 0.0], [1.0, 0.0], [3.0, 0.0], [3.0, 4.0]])
NU_NORM = [1 / 1.5, 1 / 1.5, 2 / 1.5, 4 / 1.5]


def test_normalized_novelty_hand_computed() -> None:
    np.testing.assert_allclose(normalized_novelty(Z, eps=0.0), NU_NORM, rtol=1e-12)
    # the default eps = 1e-8 only shifts the denominator: 1 / (1.5 + 1e-8)
    assert normalized_novelty(Z)[0] == pytest.approx(1 / (1.5 + 1e-8), rel=1e-12)


def test_degenerate_archives() -> None:
    assert np.isnan(normalized_novelty(np.array([[1.0, 2.0]]))).all()
    assert normalized_novelty(np.zeros((0, 3))).shape == (0,)
    # two elites: nu = [5, 5], median 5 -> [1, 1]
    np.testing.assert_allclose(normalized_novelty(np.array([[0.0, 0], [3, 4]]), eps=0), [1, 1])
    with pytest.raises(ValueError, match="shape"):
        normalized_novelty(np.zeros(3))


def test_archive_novelty_is_within_each_task() -> None:
    # Task A holds Z (interleaved with B); task B has one elite, whose nu_norm is NaN.
    elites = pd.DataFrame({
        "task": ["A", "A", "B", "A", "A"],
        "d_0": [Z[0, 0], Z[1, 0], 100.0, Z[2, 0], Z[3, 0]],
        "d_1": [Z[0, 1], Z[1, 1], 100.0, Z[2, 1], Z[3, 1]],
    }, index=[5, 6, 7, 8, 9])
    nu = archive_novelty(elites, eps=0.0)
    assert list(nu.index) == [5, 6, 7, 8, 9]
    np.testing.assert_allclose(nu[[5, 6, 8, 9]], NU_NORM, rtol=1e-12)
    assert np.isnan(nu[7])
