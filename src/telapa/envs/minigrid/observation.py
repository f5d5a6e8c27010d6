"""The agent's observation: a port of ``MiniGridEnv.gen_obs``.

The image is the egocentric 7x7 view of ``gen_obs_grid``: ``grid.slice`` at
``get_view_exts`` (cells outside the grid read as walls), rotated so the agent looks up
from cell ``(3, 6)``, ``Grid.process_vis`` occlusion unless ``see_through_walls``
(invisible cells encode as 0 / "unseen"), and the carried object, or nothing, drawn in
the agent's cell. Everything is fixed-size gathers and elementwise ops, so it vectorises
under ``vmap``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from telapa.envs.base import ArraySpec, Obs
from telapa.envs.minigrid.constants import (
    COLOR_TO_IDX,
    DIR_TO_VEC,
    OBJECT_TO_IDX,
    STATE_TO_IDX,
    VIEW_SIZE,
)
from telapa.envs.minigrid.objects import WALL_CELL, is_opaque
from telapa.envs.minigrid.state import State

AGENT_VIEW_POS = (VIEW_SIZE // 2, VIEW_SIZE - 1)
"""Where the agent is in its own view: bottom centre, looking up."""


def _view_offsets() -> np.ndarray:
    """``(4, V, V, 2)``: world offset from the agent of view cell ``[vx, vy]`` per direction.

    Inverts ``MiniGridEnv.get_view_coords``: view cell ``(vx, vy)`` lies
    ``V - 1 - vy`` cells ahead of the agent and ``vx - V // 2`` cells to its right.
    """
    vx, vy = np.meshgrid(np.arange(VIEW_SIZE), np.arange(VIEW_SIZE), indexing="ij")
    ahead = AGENT_VIEW_POS[1] - vy
    right = vx - AGENT_VIEW_POS[0]
    offsets = []
    for dx, dy in DIR_TO_VEC:
        rx, ry = -dy, dx  # MiniGridEnv.right_vec
        offsets.append(np.stack([dx * ahead + rx * right, dy * ahead + ry * right], -1))
    return np.stack(offsets).astype(np.int32)


VIEW_OFFSETS = _view_offsets()


_ROW_BITS = (1 << VIEW_SIZE) - 1


def _row_sweep_table() -> np.ndarray:
    """``Grid.process_vis``'s sweep of one view row, for every (seen, clear) row pair.

    Rows are V-bit masks (bit ``vx``): ``seen``, the row's cells lit so far (by the row
    below), and ``clear``, its see-through cells. Farama's two sweeps along the row make
    a seen clear cell light its whole run of clear cells plus the cells bounding the run,
    in this row and, through the diagonal steps, the row above. Entry
    ``seen << V | clear`` holds ``lit | above << V``: the row's final mask and what it
    lights above.
    """
    index = np.arange(1 << (2 * VIEW_SIZE))
    seen, clear = index >> VIEW_SIZE, index & _ROW_BITS
    run = seen & clear
    for _ in range(VIEW_SIZE - 1):
        run |= ((run << 1) | (run >> 1)) & clear
    above = (run | (run << 1) | (run >> 1)) & _ROW_BITS
    return ((seen | above) | (above << VIEW_SIZE)).astype(np.int16)


_ROW_SWEEP = _row_sweep_table()


def visibility(view: jax.Array) -> jax.Array:
    """``Grid.process_vis`` of a ``(V, V, 3)`` view from `AGENT_VIEW_POS`: bool ``(V, V)``.

    Farama sweeps the rows from the agent's upwards, each row's outcome depending only
    on what it was lit with and which of its cells are see-through; that per-row map is
    tabulated (`_row_sweep_table`), leaving V table lookups.
    """
    bit = jnp.arange(VIEW_SIZE, dtype=jnp.int32)
    clear = (~is_opaque(view)).astype(jnp.int32)  # [vx, vy]
    clear_rows = jnp.sum(clear << bit[:, None], axis=0)  # [vy]
    sweep = jnp.asarray(_ROW_SWEEP)
    seen = jnp.int32(1 << AGENT_VIEW_POS[0])
    lit_rows = []
    for vy in reversed(range(VIEW_SIZE)):
        swept = sweep[(seen << VIEW_SIZE) | clear_rows[vy]].astype(jnp.int32)
        lit_rows.append(swept & _ROW_BITS)
        seen = swept >> VIEW_SIZE
    lit = jnp.stack(lit_rows[::-1])  # [vy]
    return ((lit[None, :] >> bit[:, None]) & 1).astype(bool)


def agent_view(state: State, see_through_walls: bool) -> jax.Array:
    """``grid.encode(vis_mask)`` of ``gen_obs_grid``: uint8 ``(V, V, 3)``."""
    width, height = state.grid.shape[:2]
    coords = state.agent_pos + jnp.asarray(VIEW_OFFSETS)[state.agent_dir]
    x, y = coords[..., 0], coords[..., 1]
    inside = (x >= 0) & (x < width) & (y >= 0) & (y < height)
    flat_index = jnp.clip(x, 0, width - 1) * height + jnp.clip(y, 0, height - 1)
    view = state.grid.reshape(width * height, 3)[flat_index]
    view = jnp.where(inside[..., None], view, jnp.asarray(WALL_CELL))
    if not see_through_walls:
        view = jnp.where(visibility(view)[..., None], view, jnp.zeros_like(view))
    return view.at[AGENT_VIEW_POS].set(state.carrying)


def observe(state: State, see_through_walls: bool, observe_mission: bool = True) -> Obs:
    """``gen_obs``: ``image``, ``direction`` and, unless dropped, the ``mission`` indices."""
    obs = {"image": agent_view(state, see_through_walls), "direction": state.agent_dir}
    if observe_mission:
        obs["mission"] = state.mission
    return obs


def observation_specs(observe_mission: bool = True) -> dict[str, ArraySpec]:
    """Shapes and dtypes of `observe`'s entries, shared by both backends."""
    specs = {
        "image": ArraySpec((VIEW_SIZE, VIEW_SIZE, 3), np.uint8,
                           levels=(len(OBJECT_TO_IDX), len(COLOR_TO_IDX), len(STATE_TO_IDX))),
        "direction": ArraySpec((), np.int32, levels=(len(DIR_TO_VEC),)),
    }
    if observe_mission:  # (colour, object type); -1 where the mission names none
        specs["mission"] = ArraySpec((2,), np.int32,
                                     levels=(len(COLOR_TO_IDX), len(OBJECT_TO_IDX)))
    return specs
