"""``minigrid.envs.MultiRoomEnv``, two-room configuration: open the door, reach the goal.

``MiniGrid-MultiRoom-N2-S4-v0`` (``minNumRooms = maxNumRooms = 2``, ``maxRoomSize = 4``)
on an unwalled 25x25 grid. Farama's ``_gen_grid`` repeats an attempt until one yields
two rooms: an attempt draws the first room's top-left corner (``entryDoorPos``) and
``_placeRoom`` puts the room there if it fits, then makes up to 8 tries at the second
room (exit wall, door on it, room beside it) and keeps the first try that fits. For two
rooms ``_placeRoom``'s overlap check (``roomList[:-1]``) never applies, and its "True
even when the next room failed" return only matters through the outer retry, which
keeps the first attempt that placed both rooms. `sample_rooms` runs exactly these
attempts in a ``lax.while_loop`` (its 8 tries vectorised), so it draws Farama's room
distribution: that of one attempt conditioned on having placed both rooms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp

from telapa.envs.minigrid.constants import CLOSED, COLOR_TO_IDX, DOOR
from telapa.envs.minigrid.layout import put, region, sample_empty_cell
from telapa.envs.minigrid.objects import EMPTY_CELL, GOAL_CELL, WALL_CELL, cell
from telapa.envs.minigrid.state import State
from telapa.envs.minigrid.task import GOAL_MISSION, Task

ROOM_SIZE = 4
"""Both sides of both rooms: ``_rand_int(minSz=4, maxRoomSize + 1)`` with maxRoomSize 4."""
TRIES = 8
"""``_placeRoom``'s tries at the next room."""
EXIT_WALLS = (0, 1, 3)
"""``sorted({0, 1, 2, 3} - {entryDoorWall})``: right, south, north (the entry wall is 2)."""


class Rooms(NamedTuple):
    """One attempt's rooms: int32 ``(2,)`` top-left corners and door, and its outcome."""

    first: jax.Array
    second: jax.Array
    door: jax.Array
    placed: jax.Array  # bool: both rooms fit


def room_fits(top: jax.Array, width: int, height: int) -> jax.Array:
    """``_placeRoom``'s bounds check of a room's top-left corner.

    Asymmetric as in Farama: ``topX + sizeX > width`` fails but so does
    ``topY + sizeY >= height``, so a room may touch the right edge of the grid but not
    the bottom one.
    """
    return jnp.all(top >= 0) & (top[0] + ROOM_SIZE <= width) & (top[1] + ROOM_SIZE < height)


def next_room(key: jax.Array, first: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One try of ``_placeRoom`` at the second room: ``(door, top-left corner)``.

    The exit wall is uniform over `EXIT_WALLS`; the door lies on it at a uniform offset
    in ``[1, size - 1)`` from the corner; the second room starts at the door on that
    axis (the right and south walls) or ends there (the north wall), and across it
    starts ``_rand_int(door - size + 2, door)``, i.e. ``door - U[1, size - 1)``.
    """
    wall_key, door_key, room_key = jax.random.split(key, 3)
    wall = jnp.asarray(EXIT_WALLS)[jax.random.randint(wall_key, (), 0, len(EXIT_WALLS))]
    on_wall_axis = jnp.arange(2) == wall % 2  # x for the right wall, y for south/north
    far_wall = wall != 3  # right or south: the wall at top + size - 1
    door = jnp.where(
        on_wall_axis,
        first + jnp.where(far_wall, ROOM_SIZE - 1, 0),
        first + jax.random.randint(door_key, (2,), 1, ROOM_SIZE - 1),
    )
    top = jnp.where(
        on_wall_axis,
        door - jnp.where(far_wall, 0, ROOM_SIZE - 1),
        door - jax.random.randint(room_key, (2,), 1, ROOM_SIZE - 1),
    )
    return door, top


def attempt(key: jax.Array, width: int, height: int) -> Rooms:
    """One pass of ``_gen_grid``'s ``while len(roomList) < numRooms`` loop."""
    entry_key, tries_key = jax.random.split(key)
    first = jax.random.randint(entry_key, (2,), 0, width - 2)  # both coordinates use width
    doors, seconds = jax.vmap(next_room, (0, None))(jax.random.split(tries_key, TRIES), first)
    fits = jax.vmap(room_fits, (0, None, None))(seconds, width, height)
    pick = jnp.argmax(fits)  # the first try that fits
    return Rooms(first, seconds[pick], doors[pick], room_fits(first, width, height) & fits.any())


def sample_rooms(key: jax.Array, width: int, height: int) -> Rooms:
    """`attempt` until both rooms are placed (Farama keeps that first full attempt)."""

    def retry(carry: tuple[jax.Array, Rooms]) -> tuple[jax.Array, Rooms]:
        key, _ = carry
        key, attempt_key = jax.random.split(key)
        return key, attempt(attempt_key, width, height)

    nothing = jnp.zeros(2, jnp.int32)
    not_yet = Rooms(nothing, nothing, nothing, placed=jnp.bool_(False))
    _, rooms = jax.lax.while_loop(lambda carry: ~carry[1].placed, retry, (key, not_yet))
    return rooms


def room_walls(width: int, height: int, top: jax.Array) -> jax.Array:
    """bool ``(width, height)``: the walls ``_gen_grid`` draws around a room."""
    inside = region(width, height, top + 1, (ROOM_SIZE - 2, ROOM_SIZE - 2))
    return region(width, height, top, (ROOM_SIZE, ROOM_SIZE)) & ~inside


@dataclass(frozen=True)
class MultiRoom(Task):
    """Two 4x4 rooms sharing a wall, joined by a closed door of a uniform colour.

    The agent starts anywhere in the first room with a uniform direction, the goal is
    anywhere in the second; no outer wall surrounds the grid.
    """

    def generate(self, key: jax.Array) -> State:
        width, height = self.width, self.height
        rooms_key, color_key, agent_key, dir_key, goal_key = jax.random.split(key, 5)
        rooms = sample_rooms(rooms_key, width, height)
        walls = room_walls(width, height, rooms.first) | room_walls(width, height, rooms.second)
        grid = jnp.where(walls[..., None], WALL_CELL, EMPTY_CELL)
        # The only door: no previous door colour to avoid, so all six are allowed.
        color = jax.random.randint(color_key, (), 0, len(COLOR_TO_IDX)).astype(jnp.uint8)
        grid = put(grid, rooms.door, jnp.asarray(cell(DOOR, 0, CLOSED)).at[1].set(color))
        square = (ROOM_SIZE, ROOM_SIZE)
        agent_pos = sample_empty_cell(agent_key, grid, region(width, height, rooms.first, square))
        agent_dir = jax.random.randint(dir_key, (), 0, 4)
        second = region(width, height, rooms.second, square)
        goal_pos = sample_empty_cell(goal_key, grid, second, avoid=agent_pos)
        grid = put(grid, goal_pos, GOAL_CELL)
        return State.create(grid, agent_pos, agent_dir, GOAL_MISSION, self.max_steps)


TASKS = (MultiRoom("MiniGrid-MultiRoom-N2-S4-v0", 25, 25, max_steps=2 * 20),)
