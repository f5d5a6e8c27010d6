"""Recorded lineage of policy elites as bitmasks over curriculum visits (paper Sec. 4,
"Stepping-Stone Lineages Across Task Archives").

Bit ``v`` (word ``v // 32``, bit ``v % 32``) is set when the elite's ancestry
passed through visit ``v`` of the curriculum (the run's visit table, e.g. A, B, ..., A').
An elite created on visit t from parent p gets ``lineage(p) | bit(t)``; a base policy
PPO-trained from a transferred elite x gets ``lineage(x) | bit(t)``. Because every hop
goes to a strictly later visit and an elite has one parent, the set sorted by visit index
*is* the ancestry path (A -> C -> D'), so breadth, family membership and non-adjacent
transitions (paper Fig. "Lineage utility") are all recoverable from W words.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import jax
import jax.numpy as jnp
import numpy as np

LINEAGE_BITS = 32
"""Visits per lineage word."""


def lineage_words(n_visits: int) -> int:
    """Words W needed for a bitmask over ``n_visits`` visits (at least 1)."""
    return max(1, math.ceil(n_visits / LINEAGE_BITS))


def lineage_bit(visit: int | jax.Array, words: int) -> jax.Array:
    """(W,) uint32 with only bit ``visit`` set (jittable in ``visit``)."""
    visit = jnp.asarray(visit, jnp.int32)
    word = jnp.arange(words, dtype=jnp.int32) == visit // LINEAGE_BITS
    bit = jnp.left_shift(jnp.uint32(1), (visit % LINEAGE_BITS).astype(jnp.uint32))
    return jnp.where(word, bit, jnp.uint32(0)).astype(jnp.uint32)


def with_visit(lineage: jax.Array, visit: int | jax.Array) -> jax.Array:
    """``lineage | bit(visit)`` for (..., W) lineages."""
    return jnp.bitwise_or(lineage, lineage_bit(visit, lineage.shape[-1]))


def lineage_from_visits(visits: Iterable[int], words: int) -> np.ndarray:
    """(W,) uint32 bitmask with the given visit indices set (host side)."""
    out = np.zeros(words, np.uint32)
    for v in visits:
        if not 0 <= v < words * LINEAGE_BITS:
            raise ValueError(f"visit {v} does not fit {words} lineage word(s)")
        out[v // LINEAGE_BITS] |= np.uint32(1 << (v % LINEAGE_BITS))
    return out


def lineage_visits(lineage: np.ndarray | jax.Array) -> list[int]:
    """Sorted visit indices set in one (W,) lineage: the ancestry path in visit order."""
    words = np.asarray(lineage, np.uint32).reshape(-1)
    return [
        w * LINEAGE_BITS + b
        for w, word in enumerate(words)
        for b in range(LINEAGE_BITS)
        if (int(word) >> b) & 1
    ]
