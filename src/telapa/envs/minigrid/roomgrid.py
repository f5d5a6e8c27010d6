"""RoomGrid levels in JAX: ``minigrid.core.roomgrid.RoomGrid`` and its pick-up rule.

`RoomGrid` is the static layout, ``num_cols x num_rows`` square rooms of side
``room_size`` sharing their walls; `RoomGrid.generate` runs ``RoomGrid._gen_grid`` and
returns a `Level` whose methods mirror the calls a task's ``_gen_grid`` makes next
(``add_door``, ``remove_wall``, ``place_in_room``, ``place_agent``, ``connect_all``).
Rooms are addressed ``(i, j)`` = (column, row) and their walls ``k`` = 0 right, 1 down,
2 left, 3 up, as in Farama; ``i``, ``j`` may be traced.

Farama's rejection loops (``place_obj``, ``place_agent``, ``connect_all``) repeat uniform
proposals until one passes a test that does not depend on the number of tries, so what
they accept is uniform over the passing proposals; each is sampled here directly from
that distribution. The loops' caps (``max_tries``, ``max_itrs``) raise instead of
returning a level and are out of reach for the ported tasks, so the level distribution
is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from telapa.envs.minigrid.constants import (
    BALL,
    CLOSED,
    COLOR_TO_IDX,
    DIR_TO_VEC,
    DOOR,
    EMPTY,
    LOCKED,
    WALL,
    Action,
)
from telapa.envs.minigrid.dynamics import Transition
from telapa.envs.minigrid.layout import put, region, sample_empty_cell
from telapa.envs.minigrid.objects import EMPTY_CELL, WALL_CELL
from telapa.envs.minigrid.state import State, is_carrying_target
from telapa.envs.minigrid.task import Task

Index = int | jax.Array


def random_color(key: jax.Array) -> jax.Array:
    """``MiniGridEnv._rand_color``: a uniform colour index."""
    return jax.random.randint(key, (), 0, len(COLOR_TO_IDX))


def obj_cell(obj_type: int, color: Index, state: Index = 0) -> jax.Array:
    """An object's encoding, ``WorldObj.encode()``, with a possibly traced colour."""
    return jnp.stack([jnp.asarray(v) for v in (obj_type, color, state)]).astype(jnp.uint8)


@dataclass(frozen=True)
class RoomGrid:
    """The static layout of a Farama ``RoomGrid`` env.

    The shared walls between neighbouring rooms are numbered: first each room's right
    wall (rows top to bottom, columns left to right), then each room's bottom wall.
    """

    room_size: int
    num_cols: int
    num_rows: int

    @property
    def width(self) -> int:
        return (self.room_size - 1) * self.num_cols + 1

    @property
    def height(self) -> int:
        return (self.room_size - 1) * self.num_rows + 1

    @property
    def n_rooms(self) -> int:
        return self.num_cols * self.num_rows

    def room_index(self, i: Index, j: Index) -> Index:
        """Flat index of room ``(i, j)`` (``room_grid[j][i]``)."""
        return j * self.num_cols + i

    def room_of(self, pos: jax.Array) -> jax.Array:
        """``room_from_pos``: the flat index of the room holding ``pos``."""
        step = self.room_size - 1
        return self.room_index(pos[0] // step, pos[1] // step)

    def room_region(self, i: Index, j: Index) -> jax.Array:
        """The cells of room ``(i, j)``, walls included (``place_obj(room.top, room.size)``)."""
        step = self.room_size - 1
        top = (i * step, j * step)
        return region(self.width, self.height, top, (self.room_size, self.room_size))

    def wall_index(self, i: Index, j: Index, k: int) -> Index:
        """The number of wall ``k`` of room ``(i, j)``, which must have a neighbour there."""
        if k in (0, 2):  # the right wall of room (i, j), or of its left neighbour
            return j * (self.num_cols - 1) + i - (k == 2)
        n_right = self.num_rows * (self.num_cols - 1)
        return n_right + (j - (k == 3)) * self.num_cols + i  # a bottom wall

    def shared_walls(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per shared wall: its two rooms' flat indices, its first corner, its direction.

        Wall ``w`` runs from ``corner[w]`` along ``axis[w]``; the cells
        ``corner + t * axis`` for ``0 < t < room_size - 1`` are where a door can go.
        """
        step = self.room_size - 1
        rooms, corners, axes = [], [], []
        for j in range(self.num_rows):
            for i in range(self.num_cols - 1):
                rooms.append((self.room_index(i, j), self.room_index(i + 1, j)))
                corners.append(((i + 1) * step, j * step))
                axes.append((0, 1))
        for j in range(self.num_rows - 1):
            for i in range(self.num_cols):
                rooms.append((self.room_index(i, j), self.room_index(i, j + 1)))
                corners.append((i * step, (j + 1) * step))
                axes.append((1, 0))
        return tuple(np.array(a, np.int32).reshape(-1, 2) for a in (rooms, corners, axes))

    def reachable(self, joined: jax.Array, start: jax.Array) -> jax.Array:
        """bool ``(n_rooms,)``: the rooms ``connect_all``'s ``find_reach`` reaches from ``start``.

        ``joined[w]`` says whether shared wall ``w`` has a door (of any state) or is
        removed.
        """
        rooms = self.shared_walls()[0]
        adjacent = jnp.zeros((self.n_rooms, self.n_rooms), bool)
        adjacent = adjacent.at[rooms[:, 0], rooms[:, 1]].set(joined)
        adjacent = adjacent.at[rooms[:, 1], rooms[:, 0]].set(joined)
        reach = jnp.arange(self.n_rooms) == start
        for _ in range(self.n_rooms - 1):
            reach = reach | jnp.any(adjacent & reach[:, None], axis=0)
        return reach

    def generate(self, key: jax.Array) -> Level:
        """``RoomGrid._gen_grid``: the rooms' walls and a uniform door position per wall.

        The agent stands in the middle room's centre facing right until `place_agent`;
        ``place_obj`` avoids it (and ``reject_next_to`` its neighbours) meanwhile.
        """
        step = self.room_size - 1
        x = np.arange(self.width)[:, None]
        y = np.arange(self.height)[None, :]
        on_wall = (x % step == 0) | (y % step == 0)
        grid = np.where(on_wall[..., None], WALL_CELL, EMPTY_CELL).astype(np.uint8)
        _, corners, axes = self.shared_walls()
        offsets = jax.random.randint(key, (len(corners), 1), 1, step)
        centre = (
            (self.num_cols // 2) * step + self.room_size // 2,
            (self.num_rows // 2) * step + self.room_size // 2,
        )
        return Level(
            rooms=self,
            grid=jnp.asarray(grid),
            contents=jnp.broadcast_to(jnp.asarray(EMPTY_CELL), grid.shape),
            agent_pos=jnp.asarray(centre, jnp.int32),
            agent_dir=jnp.zeros((), jnp.int32),
            door_pos=jnp.asarray(corners) + offsets * jnp.asarray(axes),
            joined=jnp.zeros(len(corners), bool),
            locked=jnp.zeros(self.n_rooms, bool),
        )


@struct.dataclass
class Level:
    """A RoomGrid level being generated: the grid and Farama's ``Room`` bookkeeping.

    Attributes:
        rooms: the static layout.
        grid, contents, agent_pos, agent_dir: as in `State`.
        door_pos: int32 ``(n_walls, 2)``, each shared wall's door position
            (``Room.door_pos``), drawn up front whether or not a door is added.
        joined: bool ``(n_walls,)``, the wall holds a door or was removed (``Room.doors``).
        locked: bool ``(n_rooms,)``, ``Room.locked``, set by the room's last ``add_door``.
    """

    rooms: RoomGrid = struct.field(pytree_node=False)
    grid: jax.Array
    contents: jax.Array
    agent_pos: jax.Array
    agent_dir: jax.Array
    door_pos: jax.Array
    joined: jax.Array
    locked: jax.Array

    def add_door(
        self, i: Index, j: Index, k: int, color: Index, locked: bool
    ) -> tuple[Level, jax.Array]:
        """``add_door(i, j, k, color, locked)``: a door on wall ``k`` of room ``(i, j)``."""
        wall = self.rooms.wall_index(i, j, k)
        pos = self.door_pos[wall]
        door = obj_cell(DOOR, color, LOCKED if locked else CLOSED)
        level = self.replace(
            grid=put(self.grid, pos, door),
            joined=self.joined.at[wall].set(True),
            locked=self.locked.at[self.rooms.room_index(i, j)].set(locked),
        )
        return level, pos

    def remove_wall(self, i: Index, j: Index, k: int) -> Level:
        """``remove_wall(i, j, k)``: empties wall ``k`` of room ``(i, j)`` but its corners."""
        wall = self.rooms.wall_index(i, j, k)
        _, corners, axes = self.rooms.shared_walls()
        corner, axis = jnp.asarray(corners)[wall], jnp.asarray(axes)[wall]
        size = jnp.where(axis == 1, self.rooms.room_size - 2, 1)
        opening = region(self.rooms.width, self.rooms.height, corner + axis, size)
        grid = jnp.where(opening[..., None], jnp.asarray(EMPTY_CELL), self.grid)
        return self.replace(grid=grid, joined=self.joined.at[wall].set(True))

    def place_in_room(
        self, key: jax.Array, i: Index, j: Index, obj: jax.Array, contains: jax.Array | None = None
    ) -> tuple[Level, jax.Array]:
        """``place_in_room(i, j, obj)``: ``obj`` on a uniform empty cell of the room that
        is neither the agent's nor next to it (``reject_next_to``).

        ``contains`` is what a box ``obj`` holds (``Box.contains``).
        """
        width, height = self.rooms.width, self.rooms.height
        x = jnp.arange(width)[:, None]
        y = jnp.arange(height)[None, :]
        distance = jnp.abs(x - self.agent_pos[0]) + jnp.abs(y - self.agent_pos[1])
        within = self.rooms.room_region(i, j) & (distance >= 2)
        pos = sample_empty_cell(key, self.grid, within)
        level = self.replace(grid=put(self.grid, pos, obj))
        if contains is not None:
            level = level.replace(contents=put(self.contents, pos, contains))
        return level, pos

    def block_door(self, door_pos: jax.Array, k: int, color: Index) -> Level:
        """A ball in the cell before the door on wall ``k`` (``ObstructedMazeEnv.add_door``
        with ``blocked``; ``BlockedUnlockPickupEnv``)."""
        pos = door_pos - jnp.asarray(DIR_TO_VEC)[k]
        return self.replace(grid=put(self.grid, pos, obj_cell(BALL, color)))

    def place_agent(self, key: jax.Array, i: Index, j: Index) -> Level:
        """``RoomGrid.place_agent(i, j)``: a uniform ``(position, direction)`` of the room.

        Farama draws an empty cell of the room and a direction until the cell in front is
        empty or a wall; the accepted pair is uniform over those passing pairs.
        """
        types = jnp.pad(self.grid[..., 0], 1, constant_values=WALL)
        width, height = self.rooms.width, self.rooms.height
        front = jnp.stack(
            [types[1 + dx : 1 + dx + width, 1 + dy : 1 + dy + height] for dx, dy in DIR_TO_VEC],
            axis=-1,
        )
        free = self.rooms.room_region(i, j) & (self.grid[..., 0] == EMPTY)
        valid = free[..., None] & ((front == EMPTY) | (front == WALL))
        index = jax.random.categorical(key, jnp.where(valid.reshape(-1), 0.0, -jnp.inf))
        cell_index, direction = index // 4, index % 4
        pos = jnp.stack([cell_index // height, cell_index % height])
        return self.replace(agent_pos=pos.astype(jnp.int32), agent_dir=direction.astype(jnp.int32))

    def connect_all(self, key: jax.Array) -> Level:
        """``connect_all()``: closed doors of uniform colours until every room is reachable.

        Farama draws a room and a wall until the wall is joinable (a shared wall without
        door, between unlocked rooms; adding doors keeps the rest joinable), adds a door
        there and stops once all rooms are reachable from the agent's. Each added wall
        is thus uniform over the joinable ones left: the walls are added in the order of
        a uniform permutation of the joinable walls, until all rooms are reachable.
        """
        order_key, color_key = jax.random.split(key)
        n_walls = self.joined.shape[0]
        order = jax.random.permutation(order_key, n_walls)
        colors = jax.random.randint(color_key, (n_walls,), 0, len(COLOR_TO_IDX))
        rooms = self.rooms.shared_walls()[0]
        joinable = ~self.joined & ~self.locked[rooms[:, 0]] & ~self.locked[rooms[:, 1]]
        start = self.rooms.room_of(self.agent_pos)

        def add(carry: tuple[jax.Array, jax.Array], wall: jax.Array):
            grid, joined = carry
            adding = joinable[wall] & ~jnp.all(self.rooms.reachable(joined, start))
            door = put(grid, self.door_pos[wall], obj_cell(DOOR, colors[wall], CLOSED))
            grid = jnp.where(adding, door, grid)
            return (grid, joined.at[wall].set(joined[wall] | adding)), None

        (grid, joined), _ = jax.lax.scan(add, (self.grid, self.joined), order)
        return self.replace(grid=grid, joined=joined)

    def to_state(
        self, mission: tuple[Index, Index], max_steps: int, target_pos: jax.Array
    ) -> State:
        """The episode's start `State`, ``env.obj`` at ``target_pos``."""
        return State.create(
            self.grid,
            self.agent_pos,
            self.agent_dir,
            jnp.stack([jnp.asarray(v) for v in mission]),
            max_steps,
            contents=self.contents,
            target_pos=target_pos,
        )


@dataclass(frozen=True)
class PickupTask(Task):
    """An env won by picking up ``env.obj``: its ``step`` rewards ``action == pickup`` while
    ``self.carrying == self.obj`` (``WorldObj`` has no ``__eq__``: identity)."""

    def rules(
        self, prev: State, action: jax.Array, state: State, transition: Transition
    ) -> tuple[jax.Array, jax.Array]:
        del prev, transition
        return (action == Action.PICKUP) & is_carrying_target(state), jnp.bool_(False)
