"""Farama MiniGrid's picture of a port's state: ``env.render()`` with ``render_mode="rgb_array"``.

`render` draws `State`s as RGB frames, pixel for pixel what Farama's ``get_full_render``
draws for the same env state (tests/envs/test_minigrid_render.py compares them), as one
jitted gather over any leading batch axes: a whole episode's ``(T,)`` states become one
``(T, H * tile_size, W * tile_size, 3)`` uint8 array.

**Frame.** Cell ``(x, y)`` of the ``W x H`` grid is the tile at rows
``y * tile_size : (y + 1) * tile_size`` and columns ``x * tile_size : (x + 1) * tile_size``
(default tile size 32 px, Farama's ``TILE_PIXELS``). A tile depends only on the cell's
encoding ``(type, colour, state)``, whether the agent stands there and facing where, and
whether the cell is highlighted, so every distinct tile is drawn once per tile size
(`tile_table`) and a frame is a gather from that table.

**Tiles** (``Grid.render_tile``; ``WorldObj.render``): drawn at ``s = 3`` times the
resolution (``subdivs``) in an ``n x n`` uint8 image, ``n = s * tile_size``. A shape fills
the pixels ``(i, j)`` (row, column) whose centre ``(u, v) = ((j + 0.5) / n, (i + 0.5) / n)``
lies in it (``fill_coords``), with the tests of ``point_in_rect`` / ``_circle`` / ``_line``
/ ``_triangle`` evaluated in Farama's dtypes (float64, float32 for the vertex arithmetic
of lines and triangles); a float colour is truncated to uint8. Layers in order: the grid
lines (grey 100 where ``u <= 0.031`` or ``v <= 0.031``), the object (empty, unseen and
agent cells draw none; a box does not show its contents), the agent, a red triangle
``(0.12, 0.19), (0.87, 0.50), (0.12, 0.81)`` rotated by ``dir * 90`` degrees about
``(0.5, 0.5)`` (``rotate_fn``: a point is inside when its rotation by ``-dir * 90``
degrees is in the unrotated triangle), and the highlight
``c <- trunc(c + 0.3 * (255 - c))`` (``highlight_img``). The tile is then the mean of each
``s x s`` block (``downsample``: a mean over columns, then over rows, in float64),
truncated to uint8 when Farama copies it into the frame.

**Highlight** (``highlight=True``, Farama's default): the cells of the agent's 7 x 7 view
(``gen_obs_grid``: `observation.VIEW_OFFSETS` of the agent) that it sees, i.e. those that
`observation.agent_view` does not encode as unseen (``process_vis`` occlusion unless
``see_through_walls``, when the whole view is seen) and that lie in the grid.

Not drawn: Farama's ``agent_pov`` picture and the ``human`` window's mission text.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from telapa.envs.minigrid.constants import (
    AGENT,
    BALL,
    BOX,
    COLOR_TO_IDX,
    DIR_TO_VEC,
    DOOR,
    EMPTY,
    FLOOR,
    GOAL,
    KEY,
    LAVA,
    LOCKED,
    OBJECT_TO_IDX,
    OPEN,
    STATE_TO_IDX,
    UNSEEN,
    VIEW_SIZE,
    WALL,
)
from telapa.envs.minigrid.observation import AGENT_VIEW_POS, agent_view
from telapa.envs.minigrid.state import State

TILE_PIXELS = 32
"""Farama's default tile size in pixels (``minigrid.core.constants.TILE_PIXELS``)."""
SUBDIVS = 3
"""Supersampling factor of ``Grid.render_tile``."""

COLORS = np.array(
    [(255, 0, 0), (0, 255, 0), (0, 0, 255), (112, 39, 195), (255, 255, 0), (100, 100, 100)]
)
"""RGB of each colour index (``minigrid.core.constants.COLORS``), int64 as Farama's."""

NO_AGENT = len(DIR_TO_VEC)
"""Agent axis of `tile_table`: 0-3 the agent facing that direction, 4 no agent."""

_N_TYPES, _N_COLORS, _N_STATES = len(OBJECT_TO_IDX), len(COLOR_TO_IDX), len(STATE_TO_IDX)
_GRID_LINE = (100, 100, 100)
_AGENT_COLOR = (255, 0, 0)
_AGENT_TRIANGLE = ((0.12, 0.19), (0.87, 0.50), (0.12, 0.81))
_HIGHLIGHT_ALPHA = 0.30


# --- Farama's shape tests, vectorised over pixel centres (u, v) -----------------------


def _rect(xmin: float, xmax: float, ymin: float, ymax: float):
    return lambda u, v: (u >= xmin) & (u <= xmax) & (v >= ymin) & (v <= ymax)


def _circle(cx: float, cy: float, r: float):
    return lambda u, v: (u - cx) * (u - cx) + (v - cy) * (v - cy) <= r * r


def _line(x0: float, y0: float, x1: float, y1: float, r: float):
    """``point_in_line``: within ``r`` of the segment; endpoints and direction float32."""
    p0 = np.array([x0, y0], np.float32)
    p1 = np.array([x1, y1], np.float32)
    direction = p1 - p0
    dist = np.linalg.norm(direction)
    direction = direction / dist
    box = _rect(min(x0, x1) - r, max(x0, x1) + r, min(y0, y1) - r, max(y0, y1) + r)

    def inside(u, v):
        du, dv = u - p0[0], v - p0[1]
        a = np.clip(du * direction[0] + dv * direction[1], 0, dist)
        eu, ev = u - (p0[0] + a * direction[0]), v - (p0[1] + a * direction[1])
        return box(u, v) & (np.sqrt(eu * eu + ev * ev) <= r)

    return inside


def _triangle(a, b, c):
    """``point_in_triangle``: barycentric test, edge vectors and their dot products float32."""
    a, b, c = (np.array(p, np.float32) for p in (a, b, c))
    v0, v1 = c - a, b - a
    dot00, dot01, dot11 = np.dot(v0, v0), np.dot(v0, v1), np.dot(v1, v1)
    inv_denom = 1 / (dot00 * dot11 - dot01 * dot01)

    def inside(u, v):
        du, dv = u - a[0], v - a[1]
        dot02 = v0[0] * du + v0[1] * dv
        dot12 = v1[0] * du + v1[1] * dv
        s = (dot11 * dot02 - dot01 * dot12) * inv_denom
        t = (dot00 * dot12 - dot01 * dot02) * inv_denom
        return (s >= 0) & (t >= 0) & (s + t < 1)

    return inside


def _rotated(inside, theta: float, cx: float = 0.5, cy: float = 0.5):
    """``rotate_fn``: ``inside`` rotated by ``theta`` about ``(cx, cy)``."""
    cos, sin = math.cos(-theta), math.sin(-theta)

    def rotated(u, v):
        du, dv = u - cx, v - cy
        return inside(cx + du * cos - dv * sin, cy + dv * cos + du * sin)

    return rotated


# --- tiles ----------------------------------------------------------------------------


def _fill(img: np.ndarray, inside, color) -> None:
    """``fill_coords``: ``color`` (cast to uint8 as numpy assigns) where ``inside``."""
    centres = (np.arange(img.shape[0]) + 0.5) / img.shape[0]
    img[inside(centres[None, :], centres[:, None])] = color


def _draw_object(img: np.ndarray, obj_type: int, color: int, state: int) -> None:
    """``WorldObj.render`` of the object encoded ``(obj_type, color, state)``."""
    c = COLORS[color]
    if obj_type in (WALL, GOAL):
        _fill(img, _rect(0, 1, 0, 1), c)
    elif obj_type == FLOOR:
        _fill(img, _rect(0.031, 1, 0.031, 1), c / 2)
    elif obj_type == LAVA:
        _fill(img, _rect(0, 1, 0, 1), (255, 128, 0))
        for i in range(3):
            ylo, yhi = 0.3 + 0.2 * i, 0.4 + 0.2 * i
            for x0, y0, x1, y1 in ((0.1, ylo, 0.3, yhi), (0.3, yhi, 0.5, ylo),
                                   (0.5, ylo, 0.7, yhi), (0.7, yhi, 0.9, ylo)):
                _fill(img, _line(x0, y0, x1, y1, r=0.03), (0, 0, 0))
    elif obj_type == DOOR and state == OPEN:
        _fill(img, _rect(0.88, 1.00, 0.00, 1.00), c)
        _fill(img, _rect(0.92, 0.96, 0.04, 0.96), (0, 0, 0))
    elif obj_type == DOOR and state == LOCKED:
        _fill(img, _rect(0.00, 1.00, 0.00, 1.00), c)
        _fill(img, _rect(0.06, 0.94, 0.06, 0.94), 0.45 * np.array(c))
        _fill(img, _rect(0.52, 0.75, 0.50, 0.56), c)
    elif obj_type == DOOR:
        _fill(img, _rect(0.00, 1.00, 0.00, 1.00), c)
        _fill(img, _rect(0.04, 0.96, 0.04, 0.96), (0, 0, 0))
        _fill(img, _rect(0.08, 0.92, 0.08, 0.92), c)
        _fill(img, _rect(0.12, 0.88, 0.12, 0.88), (0, 0, 0))
        _fill(img, _circle(cx=0.75, cy=0.50, r=0.08), c)
    elif obj_type == KEY:
        _fill(img, _rect(0.50, 0.63, 0.31, 0.88), c)
        _fill(img, _rect(0.38, 0.50, 0.59, 0.66), c)
        _fill(img, _rect(0.38, 0.50, 0.81, 0.88), c)
        _fill(img, _circle(cx=0.56, cy=0.28, r=0.190), c)
        _fill(img, _circle(cx=0.56, cy=0.28, r=0.064), (0, 0, 0))
    elif obj_type == BALL:
        _fill(img, _circle(0.5, 0.5, 0.31), c)
    elif obj_type == BOX:
        _fill(img, _rect(0.12, 0.88, 0.12, 0.88), c)
        _fill(img, _rect(0.18, 0.82, 0.18, 0.82), (0, 0, 0))
        _fill(img, _rect(0.16, 0.84, 0.47, 0.53), c)


def _sprite_key(obj_type: int, color: int, state: int) -> tuple[int, int, int]:
    """The part of an encoding the picture depends on: one key per distinct sprite."""
    if obj_type in (UNSEEN, EMPTY, AGENT):  # Grid.decode / get: no object drawn
        return EMPTY, 0, 0
    if obj_type == LAVA:  # always orange
        return LAVA, 0, 0
    if obj_type == DOOR:
        return DOOR, color, min(state, LOCKED)
    return obj_type, color, 0


def _render_tile(
    key: tuple[int, int, int], agent: int, highlight: bool, tile_size: int
) -> np.ndarray:
    """``Grid.render_tile``: one ``(tile_size, tile_size, 3)`` uint8 tile."""
    n = tile_size * SUBDIVS
    img = np.zeros((n, n, 3), np.uint8)
    _fill(img, _rect(0, 0.031, 0, 1), _GRID_LINE)
    _fill(img, _rect(0, 1, 0, 0.031), _GRID_LINE)
    _draw_object(img, *key)
    if agent != NO_AGENT:
        triangle = _triangle(*_AGENT_TRIANGLE)
        _fill(img, _rotated(triangle, theta=0.5 * math.pi * agent), _AGENT_COLOR)
    if highlight:
        white = np.array((255, 255, 255), np.uint8)
        img = (img + _HIGHLIGHT_ALPHA * (white - img)).clip(0, 255).astype(np.uint8)
    blocks = img.reshape(tile_size, SUBDIVS, tile_size, SUBDIVS, 3)
    return blocks.mean(axis=3).mean(axis=1).astype(np.uint8)


@functools.cache
def tile_table(tile_size: int = TILE_PIXELS) -> tuple[np.ndarray, np.ndarray]:
    """Every distinct tile of ``tile_size`` px, drawn once (about 0.5 s at 32 px).

    Returns ``(tiles, sprite)``: ``tiles`` uint8 ``(K, 5, 2, tile_size, tile_size, 3)``
    indexed ``[sprite id, agent, highlighted]`` (agent: its direction 0-3, `NO_AGENT`
    when it is elsewhere), and ``sprite`` int32 ``(11, 6, 3)``, the sprite id of each
    encoding ``(type, colour, state)``.
    """
    keys: dict[tuple[int, int, int], int] = {}
    sprite = np.zeros((_N_TYPES, _N_COLORS, _N_STATES), np.int32)
    for index in np.ndindex(sprite.shape):
        sprite[index] = keys.setdefault(_sprite_key(*index), len(keys))
    tiles = np.stack([
        np.stack([
            np.stack([_render_tile(key, agent, highlight, tile_size) for highlight in (0, 1)])
            for agent in range(NO_AGENT + 1)
        ])
        for key in keys
    ])
    tiles.setflags(write=False)
    sprite.setflags(write=False)
    return tiles, sprite


# --- frames ---------------------------------------------------------------------------


def _cells(width: int, height: int) -> jax.Array:
    """int32 ``(W, H, 2)``: each cell's ``(x, y)``."""
    return jnp.stack(jnp.meshgrid(jnp.arange(width), jnp.arange(height), indexing="ij"), -1)


def highlight_mask(state: State, see_through_walls: bool) -> jax.Array:
    """bool ``(W, H)``: the grid cells Farama highlights, those the agent sees.

    A cell ``ahead`` steps in front of the agent and ``right`` steps to its right is view
    cell ``(V // 2 + right, V - 1 - ahead)`` (`observation.VIEW_OFFSETS` inverted); it is
    highlighted when that lies in the ``V x V`` view and `agent_view` does not encode it
    as unseen (type 0).
    """
    width, height = state.grid.shape[:2]
    forward = jnp.asarray(DIR_TO_VEC)[state.agent_dir]
    right_vec = jnp.stack([-forward[1], forward[0]])  # MiniGridEnv.right_vec
    cells = _cells(width, height)
    offset = cells - state.agent_pos
    vx = AGENT_VIEW_POS[0] + offset @ right_vec
    vy = AGENT_VIEW_POS[1] - offset @ forward
    in_view = (vx >= 0) & (vx < VIEW_SIZE) & (vy >= 0) & (vy < VIEW_SIZE)
    seen = agent_view(state, see_through_walls)[..., 0] != UNSEEN
    return in_view & seen[jnp.clip(vx, 0, VIEW_SIZE - 1), jnp.clip(vy, 0, VIEW_SIZE - 1)]


def _frame(
    tiles: jax.Array, sprite: jax.Array, state: State, see_through_walls: bool, highlight: bool
) -> jax.Array:
    """One state's ``(H * tile_size, W * tile_size, 3)`` frame."""
    width, height = state.grid.shape[:2]
    grid = state.grid.astype(jnp.int32)
    sprites = sprite[grid[..., 0], grid[..., 1], grid[..., 2]]
    cells = _cells(width, height)
    agent_here = jnp.all(cells == state.agent_pos, axis=-1)
    agent = jnp.where(agent_here, state.agent_dir, NO_AGENT)
    lit = highlight_mask(state, see_through_walls) if highlight else jnp.zeros_like(agent_here)
    frame = tiles[sprites, agent, lit.astype(jnp.int32)]  # (W, H, ts, ts, 3)
    tile_size = tiles.shape[-2]
    return frame.transpose(1, 2, 0, 3, 4).reshape(height * tile_size, width * tile_size, 3)


@functools.partial(jax.jit, static_argnames=("see_through_walls", "highlight"))
def _frames(
    tiles: jax.Array, sprite: jax.Array, states: State, see_through_walls: bool, highlight: bool
) -> jax.Array:
    return jax.vmap(lambda s: _frame(tiles, sprite, s, see_through_walls, highlight))(states)


def render(
    states: State,
    *,
    see_through_walls: bool,
    tile_size: int = TILE_PIXELS,
    highlight: bool = True,
) -> jax.Array:
    """Farama's ``env.render()`` (``rgb_array``) of each state: uint8 ``(..., H*ts, W*ts, 3)``.

    Args:
        states: a `State`, or states with any leading batch axes (e.g. an episode's
            ``(T,)`` states from a ``scan``); the leading axes are kept.
        see_through_walls: the task's flag (``env.task.see_through_walls``): which cells
            the highlighted field of view covers.
        tile_size: pixels per cell (Farama's ``tile_size``).
        highlight: highlight the cells the agent sees (Farama's ``highlight``).

    Jitted once per grid size, batch size and settings; `tile_table` is drawn on first use
    of a tile size.
    """
    batch = states.grid.shape[:-3]
    flat = jax.tree.map(lambda x: x.reshape(-1, *x.shape[len(batch):]), states)
    tiles, sprite = tile_table(tile_size)
    frames = _frames(jnp.asarray(tiles), jnp.asarray(sprite), flat, see_through_walls, highlight)
    return frames.reshape(*batch, *frames.shape[1:])


__all__ = ["COLORS", "NO_AGENT", "SUBDIVS", "TILE_PIXELS", "highlight_mask", "render",
           "tile_table"]
