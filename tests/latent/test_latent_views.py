"""Contrastive views: temporal crop bounds, one dropout mask per view, noise, keys."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from telapa.latent import LatentConfig, batch_views, crop_length_bounds, make_view, two_views

T, D = 16, 11


def _ramp(length: int) -> jax.Array:
    """f[t, k] = t + 1 on valid steps, zero after."""
    t = np.arange(T, dtype=np.float32)[:, None] + 1
    return jnp.asarray(np.where(t <= length, t, 0) * np.ones((1, D), np.float32))


@pytest.mark.parametrize(
    ("length", "rho", "lo"),
    [(10, 0.6, 6), (5, 0.6, 3), (256, 0.6, 153), (10, 0.7, 7), (1, 0.6, 1), (0, 0.6, 0),
     (7, 1.0, 7)],
)
def test_crop_bounds_floor_rho_l(length, rho, lo):
    got_lo, hi = crop_length_bounds(jnp.int32(length), rho)
    assert (int(got_lo), int(hi)) == (lo, length)


def test_crop_is_a_contiguous_slice_of_valid_steps_with_length_in_bounds():
    cfg = LatentConfig(feature_drop_prob=0.0, noise_std=0.0)
    length = 10
    feats = _ramp(length)
    keys = jax.random.split(jax.random.key(0), 400)
    views, lens = jax.vmap(make_view, in_axes=(0, None, None, None))(keys, feats, length, cfg)
    lens = np.asarray(lens)
    assert lens.min() >= 6 and lens.max() <= 10
    assert set(lens.tolist()) == {6, 7, 8, 9, 10}
    starts = set()
    for v, n in zip(np.asarray(views), lens, strict=True):
        start = v[0, 0] - 1
        starts.add(int(start))
        np.testing.assert_array_equal(v[:n, 0], start + 1 + np.arange(n))
        assert start + n <= length
        assert np.all(v[n:] == 0)
    assert starts == set(range(5))  # every start 0..l-L' is used


def test_one_dropout_mask_per_view():
    cfg = LatentConfig(feature_drop_prob=0.5, noise_std=0.0)
    feats = _ramp(T)
    differ = 0
    for i in range(20):
        views, lens = two_views(jax.random.key(i), feats, T, cfg)
        masks = []
        for v, n in zip(np.asarray(views), np.asarray(lens), strict=True):
            kept = v[0] != 0
            # A channel is either kept at every valid step or dropped at every step.
            assert np.all((v[:n] != 0) == kept[None])
            masks.append(kept)
        differ += int(np.any(masks[0] != masks[1]))
    assert differ > 0  # the two views draw their own masks


def test_noise_only_on_valid_steps_and_determinism():
    cfg = LatentConfig(feature_drop_prob=0.0, noise_std=0.1)
    feats = jnp.stack([_ramp(12), _ramp(4)])
    lengths = jnp.array([12, 4])
    views, lens = batch_views(jax.random.key(3), feats, lengths, cfg)
    again, lens_again = batch_views(jax.random.key(3), feats, lengths, cfg)
    np.testing.assert_array_equal(views, again)
    np.testing.assert_array_equal(lens, lens_again)
    other, _ = batch_views(jax.random.key(4), feats, lengths, cfg)
    assert not np.array_equal(np.asarray(views), np.asarray(other))
    assert views.shape == (2, 2, T, D) and lens.shape == (2, 2)
    for b in range(2):
        for v in range(2):
            n = int(lens[b, v])
            x = np.asarray(views[b, v])
            start = np.round(x[0, 0]) - 1
            resid = x[:n] - (start + 1 + np.arange(n))[:, None]  # the noise
            assert np.abs(resid).max() < 0.6 and 0.05 < resid.std() < 0.2
            assert np.all(x[n:] == 0)


def test_empty_episode_gives_empty_view():
    view, n = make_view(jax.random.key(0), jnp.zeros((T, D)), 0, LatentConfig())
    assert int(n) == 0 and np.all(np.asarray(view) == 0)
