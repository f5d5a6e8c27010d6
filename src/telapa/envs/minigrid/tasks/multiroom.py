"""``minigrid.envs.MultiRoomEnv``, two-room configuration: open the door, reach the goal.

``MiniGrid-MultiRoom-N2-S4-v0`` (``minNumRooms = maxNumRooms = 2``, ``maxRoomSize = 4``)
on an unwalled 25x25 grid. Farama's ``_gen_grid`` repeats an attempt until one yields
two rooms: an attempt draws the first room's top-left corner (``entryDoorPos``) and
``_placeRoom`` puts the room there if it fits, then makes up to 8 tries at the second
room (exit wall, door on it, room beside it) and keeps the first try that fits. For two
rooms ``_placeRoom``'s overlap check (``roomList[:-1]``) never applies, and its "True
even when the next room failed" return only matters through the outer retry, which
keeps the first attempt that placed both rooms.

Farama's room distribution is therefore that of one attempt conditioned on having
placed both rooms, which `room_layouts` computes exactly: a try is one of 12 equally
likely outcomes (3 exit walls x 2 door offsets x 2 room offsets), so for a first corner
``c`` whose room fits, with ``n(c)`` of the 12 outcomes fitting,

    P(c, o) ∝ [o fits] / n(c) * (1 - (1 - n(c) / 12) ** 8),

the first factor being which fitting outcome the first fitting try is (uniform), the
second the chance that one of the 8 tries fits (the 1/529 of the corner is common to
all). `sample_rooms` draws from this table with one 32-bit word (probabilities rounded
to multiples of 2**-32), where a rejection loop would cost tens of env steps per level.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from telapa.envs.minigrid.constants import CLOSED, COLOR_TO_IDX, DOOR
from telapa.envs.minigrid.layout import put, rand_ints
from telapa.envs.minigrid.objects import EMPTY_CELL, GOAL_CELL, WALL_CELL, cell
from telapa.envs.minigrid.state import State
from telapa.envs.minigrid.task import GOAL_MISSION, Task

ROOM_SIZE = 4
"""Both sides of both rooms: ``_rand_int(minSz=4, maxRoomSize + 1)`` with maxRoomSize 4."""
TRIES = 8
"""``_placeRoom``'s tries at the next room."""
EXIT_WALLS = (0, 1, 3)
"""``sorted({0, 1, 2, 3} - {entryDoorWall})``: right, south, north (the entry wall is 2)."""
OFFSETS = (1, 2)
"""``_rand_int(1, size - 1)`` (door along its wall) and ``door - _rand_int(door - size +
2, door)`` (second room across it) with size 4."""
RING = np.array(
    [(i, j) for i in range(ROOM_SIZE) for j in range(ROOM_SIZE) if {i, j} & {0, ROOM_SIZE - 1}]
)
"""The 12 wall cells of a room, relative to its top-left corner."""

FitsFn = Callable[[tuple[int, int], int, int], bool]


class Rooms(NamedTuple):
    """Top-left corners of the two rooms and the door between them, int32 ``(..., 2)``."""

    first: jax.Array
    second: jax.Array
    door: jax.Array


def room_fits(top: tuple[int, int], width: int, height: int) -> bool:
    """``_placeRoom``'s bounds check of a room's top-left corner.

    Asymmetric as in Farama: ``topX + sizeX > width`` fails but so does
    ``topY + sizeY >= height``, so a room may touch the right edge of the grid but not
    the bottom one.
    """
    x, y = top
    return x >= 0 and y >= 0 and x + ROOM_SIZE <= width and y + ROOM_SIZE < height


def next_room(first: tuple[int, int], wall: int, door_offset: int, room_offset: int):
    """One try of ``_placeRoom`` at the second room: ``(door, top-left corner)``.

    The door lies on the exit wall (right 0, south 1, north 3) ``door_offset`` from the
    corner; the second room starts at the door on that axis (right and south walls) or
    ends there (north wall), and across it starts ``room_offset`` before the door.
    """
    along = wall % 2  # the axis the wall crosses: x for the right wall, y for south/north
    step = ROOM_SIZE - 1 if wall != 3 else 1 - ROOM_SIZE  # first corner -> second, on it
    door, top = list(first), list(first)
    door[along] += max(step, 0)  # the far wall (right, south) or the near one (north)
    top[along] += step
    door[1 - along] += door_offset
    top[1 - along] += door_offset - room_offset
    return tuple(door), tuple(top)


@functools.cache
def room_layouts(width: int, height: int, fits: FitsFn = room_fits) -> tuple[np.ndarray, ...]:
    """Farama's distribution of two-room layouts (module docstring) as a sampling table.

    Returns ``(edges, first, second, door)``: uint32 ``(n - 1,)`` upper edges of each
    layout's share of ``[0, 2**32)``, and int32 ``(n, 2)`` corners and doors of the
    ``n`` layouts of positive probability.
    """
    outcomes = list(itertools.product(EXIT_WALLS, OFFSETS, OFFSETS))
    layouts, weights = [], []
    for first in itertools.product(range(width - 2), repeat=2):  # both draws use width
        if not fits(first, width, height):
            continue
        tries = [next_room(first, *outcome) for outcome in outcomes]
        fitting = [(door, second) for door, second in tries if fits(second, width, height)]
        if not fitting:
            continue
        placed = 1 - (1 - len(fitting) / len(outcomes)) ** TRIES
        layouts += [(first, second, door) for door, second in fitting]
        weights += [placed / len(fitting)] * len(fitting)
    cumulative = np.cumsum(weights) / np.sum(weights)
    edges = np.minimum(np.round(cumulative[:-1] * 2.0**32), 2**32 - 1).astype(np.uint32)
    first, second, door = (np.array(column, np.int32) for column in zip(*layouts, strict=True))
    return edges, first, second, door


def sample_rooms(key: jax.Array, width: int, height: int) -> Rooms:
    """One draw of Farama's two-room layout from `room_layouts`."""
    edges, first, second, door = room_layouts(width, height, room_fits)
    index = jnp.searchsorted(edges, jax.random.bits(key, (), jnp.uint32), side="right")
    return Rooms(jnp.asarray(first)[index], jnp.asarray(second)[index], jnp.asarray(door)[index])


def draw_rooms(width: int, height: int, rooms: Rooms, color: jax.Array) -> jax.Array:
    """The encoded grid: both rooms' walls, then the door between them in ``color``."""
    walls = jnp.concatenate([rooms.first + RING, rooms.second + RING])
    grid = jnp.broadcast_to(jnp.asarray(EMPTY_CELL), (width, height, 3))
    grid = grid.at[walls[:, 0], walls[:, 1]].set(jnp.asarray(WALL_CELL))
    door = jnp.asarray(cell(DOOR, 0, CLOSED)).at[1].set(color.astype(jnp.uint8))
    return put(grid, rooms.door, door)


@dataclass(frozen=True)
class MultiRoom(Task):
    """Two 4x4 rooms sharing a wall, joined by a closed door of a uniform colour.

    The agent starts anywhere in the first room with a uniform direction, the goal is
    anywhere in the second; no outer wall surrounds the grid.
    """

    def generate(self, key: jax.Array) -> State:
        rooms_key, ints_key = jax.random.split(key)
        rooms = sample_rooms(rooms_key, self.width, self.height)
        # A room's empty cells are its 2x2 inside, so place_obj's rejection sampling in
        # the first room (agent) and in the second (goal; the agent is not there) is a
        # uniform inside cell. The door is the only one: all six colours are allowed.
        inside = ROOM_SIZE - 2
        agent_x, agent_y, agent_dir, goal_x, goal_y, color = rand_ints(
            ints_key, (0,) * 6, (inside, inside, 4, inside, inside, len(COLOR_TO_IDX))
        )
        grid = draw_rooms(self.width, self.height, rooms, color)
        agent_pos = rooms.first + 1 + jnp.stack([agent_x, agent_y])
        grid = put(grid, rooms.second + 1 + jnp.stack([goal_x, goal_y]), GOAL_CELL)
        return State.create(grid, agent_pos, agent_dir, GOAL_MISSION, self.max_steps)


TASKS = (MultiRoom("MiniGrid-MultiRoom-N2-S4-v0", 25, 25, max_steps=2 * 20),)
