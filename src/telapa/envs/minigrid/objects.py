"""Farama's ``WorldObj`` behaviour on encoded cells.

A cell is a uint8 ``(type, colour, state)`` triple exactly as ``WorldObj.encode()``;
"nothing" is ``EMPTY_CELL`` = ``(1, 0, 0)``, which is also how ``Grid.encode`` writes a
``None`` cell. The predicates accept any leading batch shape.
"""

from __future__ import annotations

import jax
import numpy as np

from telapa.envs.minigrid.constants import (
    BALL,
    BOX,
    DOOR,
    EMPTY,
    FLOOR,
    GOAL,
    GREEN,
    GREY,
    KEY,
    LAVA,
    OPEN,
    RED,
    WALL,
)


def cell(obj_type: int, color: int = 0, state: int = 0) -> np.ndarray:
    """The encoding of one object, as ``WorldObj.encode()``."""
    return np.array([obj_type, color, state], dtype=np.uint8)


EMPTY_CELL = cell(EMPTY)
WALL_CELL = cell(WALL, GREY)  # Wall() is grey; out-of-grid view cells are walls too
GOAL_CELL = cell(GOAL, GREEN)  # Goal() is green
LAVA_CELL = cell(LAVA, RED)


def can_overlap(c: jax.Array) -> jax.Array:
    """``WorldObj.can_overlap``: empty, floor, goal, lava, and open doors."""
    t = c[..., 0]
    is_open_door = (t == DOOR) & (c[..., 2] == OPEN)
    return (t == EMPTY) | (t == FLOOR) | (t == GOAL) | (t == LAVA) | is_open_door


def can_pickup(c: jax.Array) -> jax.Array:
    """``WorldObj.can_pickup``: keys, balls and boxes."""
    t = c[..., 0]
    return (t == KEY) | (t == BALL) | (t == BOX)


def is_opaque(c: jax.Array) -> jax.Array:
    """``not WorldObj.see_behind()``: walls and doors that are not open."""
    t = c[..., 0]
    return (t == WALL) | ((t == DOOR) & (c[..., 2] != OPEN))


def is_nothing(c: jax.Array) -> jax.Array:
    """Whether the cell (or carried slot) holds no object."""
    return c[..., 0] == EMPTY


__all__ = [
    "EMPTY_CELL",
    "GOAL_CELL",
    "LAVA_CELL",
    "WALL_CELL",
    "can_overlap",
    "can_pickup",
    "cell",
    "is_nothing",
    "is_opaque",
]
