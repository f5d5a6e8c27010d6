"""Farama MiniGrid's encodings as plain integers and arrays.

Values mirror ``minigrid.core.constants`` (``OBJECT_TO_IDX``, ``COLOR_TO_IDX``, door
states, ``DIR_TO_VEC``) and ``minigrid.core.actions.Actions``; a test checks them
against the installed Farama package, which the JAX port itself never imports.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

OBJECT_TO_IDX: dict[str, int] = {
    "unseen": 0,
    "empty": 1,
    "wall": 2,
    "floor": 3,
    "door": 4,
    "key": 5,
    "ball": 6,
    "box": 7,
    "goal": 8,
    "lava": 9,
    "agent": 10,
}
COLOR_TO_IDX: dict[str, int] = {
    "red": 0,
    "green": 1,
    "blue": 2,
    "purple": 3,
    "yellow": 4,
    "grey": 5,
}
STATE_TO_IDX: dict[str, int] = {"open": 0, "closed": 1, "locked": 2}

UNSEEN, EMPTY, WALL, FLOOR, DOOR, KEY, BALL, BOX, GOAL, LAVA, AGENT = range(11)
RED, GREEN, BLUE, PURPLE, YELLOW, GREY = range(6)
OPEN, CLOSED, LOCKED = range(3)


class Action(IntEnum):
    """``minigrid.core.actions.Actions``."""

    LEFT = 0
    RIGHT = 1
    FORWARD = 2
    PICKUP = 3
    DROP = 4
    TOGGLE = 5
    DONE = 6


N_ACTIONS = len(Action)

DIR_TO_VEC = np.array([(1, 0), (0, 1), (-1, 0), (0, -1)], dtype=np.int32)
"""Direction index (0 right, 1 down, 2 left, 3 up) to the (dx, dy) of one step forward."""

VIEW_SIZE = 7
"""Farama's default ``agent_view_size``; every registered MiniGrid task uses it."""
