"""Robust global latent normalizer: median / IQR by hand, sigma floor, id."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from telapa.latent import Normalizer, normalizer, normalizer_id


def _bank() -> jax.Array:
    return jnp.array([
        [1.0, 5.0], [2.0, 5.0], [3.0, 5.0], [4.0, 5.0],
        [np.nan, 0.0], [np.inf, 1.0],  # non-finite rows are discarded
    ])


def test_fit_by_hand_with_sigma_floor():
    n = normalizer.fit(_bank(), sigma_min=1e-3, eps=1e-8)
    # column 0 = [1, 2, 3, 4]: median 2.5, Q25 = 1.75, Q75 = 3.25 (linear), IQR = 1.5
    # column 1 = [5, 5, 5, 5]: IQR 0 -> sigma_min
    np.testing.assert_allclose(n.median, [2.5, 5.0])
    np.testing.assert_allclose(n.sigma, [1.5 / 1.349, 1e-3], rtol=1e-6)
    z = normalizer.apply(n, jnp.array([[3.6, 5.25], [2.5, 5.0]]))
    # (3.6 - 2.5) / (1.1119348 + 1e-8) and 0.25 / (1e-3 + 1e-8)
    np.testing.assert_allclose(z, [[0.98926666, 249.9975], [0.0, 0.0]], rtol=1e-5, atol=1e-6)


def test_fit_is_jittable_and_normalizer_is_a_pytree():
    n = jax.jit(normalizer.fit, static_argnames=("sigma_min", "eps"))(_bank())
    assert len(jax.tree.leaves(n)) == 2
    out = jax.jit(normalizer.apply)(n, jnp.ones((4, 2)))
    assert out.shape == (4, 2)
    empty = normalizer.fit(jnp.full((3, 2), jnp.nan))
    assert np.all(np.isnan(np.asarray(empty.median)))


def test_id_is_a_stable_content_hash():
    a = normalizer.fit(_bank())
    b = normalizer.fit(np.asarray(_bank()))
    assert a.id == b.id == normalizer_id(a)
    assert len(a.id) == 16
    assert Normalizer.identity(2).id != a.id
    moved = Normalizer(a.median + 1e-3, a.sigma, a.eps)
    assert moved.id != a.id
    assert Normalizer(a.median, a.sigma, 1e-6).id != a.id
    np.testing.assert_array_equal(normalizer.apply(Normalizer.identity(2), jnp.ones(2)), 1.0)
