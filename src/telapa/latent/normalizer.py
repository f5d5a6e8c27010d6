"""Robust global latent normalizer N_t (paper App. "Global latent normalization",
eq. global_normalizer), fit component-wise on a bank of raw policy-level means Z (N, d):

    mu    = median(Z),   sigma = max((Q75(Z) - Q25(Z)) / 1.349, sigma_min)
    N(z)  = (z - mu) / (sigma + eps)

Rows with any non-finite entry (empty episode sets, malformed outputs) are discarded.
Quantiles interpolate linearly (numpy's default). With no finite row, mu and sigma are NaN.
"""

from __future__ import annotations

import hashlib

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

IQR_TO_STD = 1.349
"""IQR of a standard normal."""


@struct.dataclass
class Normalizer:
    """Immutable pytree: ``median`` (d,), ``sigma`` (d,) (already floored); ``eps`` static."""

    median: jax.Array
    sigma: jax.Array
    eps: float = struct.field(pytree_node=False, default=1e-8)

    @property
    def id(self) -> str:
        """Stable content hash (16 hex chars) of median, sigma and eps: see `normalizer_id`."""
        return normalizer_id(self)

    @classmethod
    def identity(cls, dim: int, eps: float = 1e-8) -> Normalizer:
        """mu = 0, sigma = 1 (before any fit)."""
        return cls(jnp.zeros(dim, jnp.float32), jnp.ones(dim, jnp.float32), eps)


def fit(raw: jax.Array, sigma_min: float = 1e-3, eps: float = 1e-8) -> Normalizer:
    """Fit on raw descriptors (N, d); jittable (``sigma_min``/``eps`` static)."""
    raw = jnp.asarray(raw, jnp.float32)
    finite = jnp.all(jnp.isfinite(raw), axis=-1, keepdims=True)
    z = jnp.where(finite, raw, jnp.nan)
    q25, q50, q75 = jnp.nanquantile(z, jnp.array([0.25, 0.5, 0.75]), axis=0)
    sigma = jnp.maximum((q75 - q25) / IQR_TO_STD, sigma_min)
    return Normalizer(q50, sigma, eps)


def apply(normalizer: Normalizer, raw: jax.Array) -> jax.Array:
    """z_hat = (z - mu) / (sigma + eps) on the last axis, (..., d)."""
    return (raw - normalizer.median) / (normalizer.sigma + normalizer.eps)


def normalizer_id(normalizer: Normalizer) -> str:
    """sha256 over the float32 bytes of median and sigma and the float64 bytes of eps,
    first 16 hex digits: equal parameters give equal ids across runs and machines."""
    h = hashlib.sha256(b"telapa-normalizer-v1")
    h.update(np.asarray(normalizer.median, np.float32).tobytes())
    h.update(np.asarray(normalizer.sigma, np.float32).tobytes())
    h.update(np.float64(normalizer.eps).tobytes())
    return h.hexdigest()[:16]
