"""Augmented views for contrastive training (paper App. "View generation for contrastive
training"). Pure functions of a PRNG key on a padded episode (T, D) with valid length l
(`make_view`, `two_views`) or on a batch (`batch_views`, which draws all randomness in
two flat calls). A view keeps the array shape (T, D): the crop is moved to the front and
zero-padded, and its valid length is L'.

    crop:    L' ~ U{max(floor(rho l), 1), ..., l},  s ~ U{0, ..., l - L'},
             E_crop = [f_s, ..., f_{s+L'-1}]                     (L' = 0 when l = 0)
    dropout: m ~ Bernoulli(1 - p)^D, once per view;  f~_t = m * f_t for every t
    noise:   f~_t <- f~_t + sigma_noise eps_t,  eps_t ~ N(0, I_D), on valid steps only

Integers uniform on {lo, ..., hi} are lo + floor(u (hi - lo + 1)) from u ~ U[0, 1).
"""

from __future__ import annotations

import math
from fractions import Fraction

import jax
import jax.numpy as jnp

from telapa.latent.config import LatentConfig


def crop_length_bounds(length: jax.Array, rho: float) -> tuple[jax.Array, jax.Array]:
    """``(lo, hi)`` = (max(floor(rho * l), 1), l), or (0, 0) when l = 0.

    floor(rho * l) is computed exactly in integers (rho as a fraction with denominator
    at most 10^4), so e.g. rho = 0.7, l = 10 gives 7, not float32's 6.
    """
    frac = Fraction(rho).limit_denominator(10_000)
    length = jnp.asarray(length, jnp.int32)
    lo = (length * frac.numerator) // frac.denominator
    lo = jnp.minimum(jnp.maximum(lo, 1), length)
    return lo, length


def _uniform_int(u: jax.Array, lo: jax.Array, hi: jax.Array) -> jax.Array:
    """Map u ~ U[0, 1) to an integer uniform on {lo, ..., hi} (hi >= lo)."""
    span = hi - lo + 1
    return lo + jnp.minimum(jnp.floor(u * span).astype(jnp.int32), span - 1)


def _uniforms(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    # Drawn flat, then reshaped: multi-dimensional draws compile very slowly on XLA:CPU.
    return jax.random.uniform(key, (math.prod(shape),)).reshape(shape)


def _normals(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    return jax.random.normal(key, (math.prod(shape),)).reshape(shape)


def _crop(
    u_len: jax.Array, u_start: jax.Array, features: jax.Array, length: jax.Array, rho: float
) -> tuple[jax.Array, jax.Array]:
    t = features.shape[-2]
    lo, hi = crop_length_bounds(length, rho)
    crop_len = _uniform_int(u_len, lo, hi)
    start = _uniform_int(u_start, jnp.int32(0), hi - crop_len)
    steps = jnp.arange(t)
    src = jnp.clip(start + steps, 0, t - 1)
    keep = (steps < crop_len)[:, None]
    return jnp.where(keep, features[src], 0.0), crop_len


def temporal_crop(
    key: jax.Array, features: jax.Array, length: jax.Array, rho: float
) -> tuple[jax.Array, jax.Array]:
    """A random contiguous crop of the valid steps, moved to the front: ((T, D), L')."""
    u = _uniforms(key, (2,))
    return _crop(u[0], u[1], features, length, rho)


def view_from_noise(
    u: jax.Array, noise: jax.Array, features: jax.Array, length: jax.Array,
    config: LatentConfig,
) -> tuple[jax.Array, jax.Array]:
    """The view given its randomness: ``u`` (2 + D,) uniforms (crop length, crop start,
    one per channel for the dropout mask) and ``noise`` (T, D) standard normals."""
    x, new_len = _crop(u[0], u[1], features.astype(jnp.float32), length,
                       config.crop_min_fraction)
    x = x * (u[2:] >= config.feature_drop_prob).astype(jnp.float32)
    valid = (jnp.arange(x.shape[-2]) < new_len)[:, None]
    return x + jnp.where(valid, config.noise_std * noise, 0.0), new_len


def make_view(
    key: jax.Array, features: jax.Array, length: jax.Array, config: LatentConfig
) -> tuple[jax.Array, jax.Array]:
    """One augmented view (crop -> feature dropout -> Gaussian noise): ((T, D), L')."""
    k_u, k_noise = jax.random.split(key)
    t, dim = features.shape
    return view_from_noise(_uniforms(k_u, (2 + dim,)), _normals(k_noise, (t, dim)),
                           features, length, config)


def batch_views(
    key: jax.Array, features: jax.Array, lengths: jax.Array, config: LatentConfig
) -> tuple[jax.Array, jax.Array]:
    """Two independent views of each of B episodes (B, T, D), (B,) -> ((B, 2, T, D),
    (B, 2)); every view has its own crop, its own dropout mask and its own noise."""
    b, t, dim = features.shape
    k_u, k_noise = jax.random.split(key)
    u = _uniforms(k_u, (b, 2, 2 + dim))
    noise = _normals(k_noise, (b, 2, t, dim))
    per_view = jax.vmap(view_from_noise, in_axes=(0, 0, None, None, None))
    return jax.vmap(per_view, in_axes=(0, 0, 0, 0, None))(u, noise, features, lengths, config)


def two_views(
    key: jax.Array, features: jax.Array, length: jax.Array, config: LatentConfig
) -> tuple[jax.Array, jax.Array]:
    """Two independent views of one episode (T, D): ((2, T, D), (2,))."""
    views, lens = batch_views(key, features[None], jnp.asarray(length)[None], config)
    return views[0], lens[0]
