"""Random objects scattered over a walled room, as Farama's GoToObject and Fetch make them.

Their ``_gen_grid`` draws ``numObjs`` objects of uniform type and colour
(``_rand_elem(types)``, ``_rand_elem(COLOR_NAMES)``), drops each anywhere with
``place_obj``, places the agent anywhere with ``place_agent`` and picks the mission's
object with ``_rand_int(0, numObjs)``. `random_objects` draws the objects,
`scattered_room` does the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp

from telapa.envs.minigrid.constants import COLOR_TO_IDX
from telapa.envs.minigrid.layout import put, sample_empty_cell, walled_grid

N_COLORS = len(COLOR_TO_IDX)


def random_objects(key: jax.Array, types: Sequence[int], n: int, *, distinct: bool) -> jax.Array:
    """uint8 ``(n, 3)``: ``n`` encoded objects of uniform type in ``types`` and colour.

    Farama draws type and colour independently, so each object is uniform over the
    ``len(types) * N_COLORS`` kinds. With ``distinct``, Farama redraws an object whose
    (type, colour) is already taken (GoToObject's ``continue``); that rejection makes the
    i-th object uniform over the kinds not yet taken, so the ``n`` objects are a uniform
    ordered draw without replacement: the first ``n`` of a uniform permutation.
    """
    n_kinds = len(types) * N_COLORS
    if distinct:
        kind = jax.random.choice(key, n_kinds, (n,), replace=False)
    else:
        kind = jax.random.randint(key, (n,), 0, n_kinds)
    obj_type = jnp.asarray(types)[kind // N_COLORS]
    return jnp.stack([obj_type, kind % N_COLORS, jnp.zeros_like(kind)], -1).astype(jnp.uint8)


class ScatteredRoom(NamedTuple):
    """A generated room: the grid, the agent, and the mission's object.

    Attributes:
        grid: uint8 ``(W, H, 3)``, the encoded grid.
        agent_pos: int32 ``(2,)``; agent_dir: int32.
        target: uint8 ``(3,)``, the encoding of the mission's object.
        target_pos: int32 ``(2,)``, where it was placed.
    """

    grid: jax.Array
    agent_pos: jax.Array
    agent_dir: jax.Array
    target: jax.Array
    target_pos: jax.Array

    @property
    def mission(self) -> jax.Array:
        """``(colour, type)`` of the target, the `State.mission` encoding."""
        return jnp.stack([self.target[1], self.target[0]]).astype(jnp.int32)


def scattered_room(key: jax.Array, width: int, height: int, objects: jax.Array) -> ScatteredRoom:
    """A walled room with ``objects`` (``(n, 3)``) placed in turn, then the agent.

    Each ``place_obj(obj)`` samples the whole grid and rejects occupied cells (the agent
    is not placed yet, at ``(-1, -1)``), so each object lands uniformly on the cells
    still empty; so does ``place_agent()``, with a uniform direction. The target is
    one of the objects, uniformly.
    """
    n = objects.shape[0]
    *place_keys, agent_key, dir_key, target_key = jax.random.split(key, n + 3)
    grid = jnp.asarray(walled_grid(width, height))
    anywhere = jnp.ones((width, height), bool)
    positions = []
    for place_key, obj in zip(place_keys, objects, strict=True):
        pos = sample_empty_cell(place_key, grid, anywhere)
        grid = put(grid, pos, obj)
        positions.append(pos)
    target = jax.random.randint(target_key, (), 0, n)
    return ScatteredRoom(
        grid=grid,
        agent_pos=sample_empty_cell(agent_key, grid, anywhere),
        agent_dir=jax.random.randint(dir_key, (), 0, 4),
        target=objects[target],
        target_pos=jnp.stack(positions)[target],
    )
