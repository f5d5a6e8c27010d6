"""Level-generation helpers: Farama's ``Grid`` building and ``place_obj`` in JAX."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from telapa.envs.minigrid.constants import EMPTY
from telapa.envs.minigrid.objects import EMPTY_CELL, WALL_CELL


def walled_grid(width: int, height: int) -> np.ndarray:
    """``Grid(width, height)`` with ``wall_rect(0, 0, width, height)``, encoded."""
    grid = np.broadcast_to(EMPTY_CELL, (width, height, 3)).copy()
    grid[[0, -1], :] = WALL_CELL
    grid[:, [0, -1]] = WALL_CELL
    return grid


def put(grid: jax.Array, pos: jax.Array | tuple[int, int], obj: jax.Array) -> jax.Array:
    """``put_obj`` / ``grid.set``: ``obj`` (an encoded cell) at ``pos``."""
    return jnp.asarray(grid).at[pos[0], pos[1]].set(jnp.asarray(obj, jnp.uint8))


def region(
    width: int, height: int, top: tuple[jax.Array | int, ...], size: tuple[jax.Array | int, ...]
) -> jax.Array:
    """bool ``(width, height)`` mask of the rectangle ``place_obj(top=..., size=...)`` samples."""
    x = jnp.arange(width)[:, None]
    y = jnp.arange(height)[None, :]
    return (x >= top[0]) & (x < top[0] + size[0]) & (y >= top[1]) & (y < top[1] + size[1])


def sample_empty_cell(
    key: jax.Array, grid: jax.Array, within: jax.Array, avoid: jax.Array | None = None
) -> jax.Array:
    """``place_obj``'s position: uniform over the empty cells of ``within`` but ``avoid``.

    Farama rejection-samples uniform positions of the rectangle until one is empty and
    not the agent's; the accepted position is uniform over exactly those cells, which
    is what this draws directly: a uniform rank among them. Returns int32 ``(x, y)``.
    """
    width, height = grid.shape[:2]
    valid = within & (grid[..., 0] == EMPTY)
    if avoid is not None:
        valid = valid & ~region(width, height, avoid, (1, 1))
    # The rank-th valid cell in [x, y] order, column first: two short cumsums are much
    # faster than one over all cells on XLA:CPU.
    per_column = jnp.sum(valid, axis=1, dtype=jnp.int32)
    columns_end = jnp.cumsum(per_column)
    rank = uniform_below(key, columns_end[-1])
    x = jnp.argmax(columns_end > rank)
    rank_in_column = rank - (columns_end[x] - per_column[x])
    y = jnp.argmax(jnp.cumsum(valid[x], dtype=jnp.int32) > rank_in_column)
    return jnp.stack([x, y]).astype(jnp.int32)


def uniform_below(key: jax.Array, n: jax.Array) -> jax.Array:
    """Uniform int32s in ``[0, n)`` for traced ``0 < n < 2**16`` (any shape), one draw each.

    Lemire's multiply-shift, ``floor(bits * n / 2**32)``, in 16-bit halves: each value
    has probability within ``1 / 2**32`` of ``1 / n``, as close as ``jax.random.randint``
    gets, from one 32-bit draw instead of its three (faster to run and to compile).
    """
    n = jnp.asarray(n).astype(jnp.uint32)
    bits = jax.random.bits(key, n.shape, jnp.uint32)
    scaled = (bits >> 16) * n + (((bits & 0xFFFF) * n) >> 16)
    return (scaled >> 16).astype(jnp.int32)


def rand_ints(key: jax.Array, low: Sequence[int], high: Sequence[int]) -> jax.Array:
    """Farama's ``_rand_int(low[i], high[i])`` for each i: int32 ``(len(low),)``."""
    low = jnp.asarray(low, jnp.int32)
    return low + uniform_below(key, jnp.asarray(high, jnp.int32) - low)
