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
from telapa.envs.minigrid.constants import DIR_TO_VEC, VIEW_SIZE
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


def visibility(view: jax.Array) -> jax.Array:
    """``Grid.process_vis`` of a ``(V, V, 3)`` view from `AGENT_VIEW_POS`: bool ``(V, V)``.

    Farama sweeps the rows from the agent's upwards; in each row, a visible transparent
    cell lights its whole run of transparent cells, plus the cells bounding the run in
    that row and, diagonally included, the row above. That closed form replaces the
    per-cell sweeps, leaving a fixed loop over the V rows.
    """
    transparent = ~is_opaque(view).T  # [vy, vx]
    run = jnp.cumsum(~transparent, axis=1)  # transparent cells of a run share this count
    same_run = (
        (run[:, :, None] == run[:, None, :]) & transparent[:, :, None] & transparent[:, None, :]
    )
    no = jnp.zeros(1, bool)
    seen = jnp.zeros(VIEW_SIZE, bool).at[AGENT_VIEW_POS[0]].set(True)
    rows = [seen] * VIEW_SIZE
    for vy in reversed(range(VIEW_SIZE)):
        lit_runs = jnp.any(same_run[vy] & seen[None, :], axis=1)
        spread = (
            lit_runs | jnp.concatenate([no, lit_runs[:-1]]) | jnp.concatenate([lit_runs[1:], no])
        )
        rows[vy] = seen | spread
        seen = spread
    return jnp.stack(rows, axis=1)


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
        "image": ArraySpec((VIEW_SIZE, VIEW_SIZE, 3), np.uint8),
        "direction": ArraySpec((), np.int32),
    }
    if observe_mission:
        specs["mission"] = ArraySpec((2,), np.int32)
    return specs
