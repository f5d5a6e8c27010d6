"""``minigrid.envs.KeyCorridorEnv``: find the key, unlock the side room, get the ball."""

from __future__ import annotations

from dataclasses import dataclass

import jax

from telapa.envs.minigrid.constants import BALL, KEY
from telapa.envs.minigrid.roomgrid import PickupTask, RoomGrid, obj_cell, random_color
from telapa.envs.minigrid.state import State


@dataclass(frozen=True)
class KeyCorridor(PickupTask):
    """Three columns of ``num_rows`` rooms: the middle column a corridor, a locked room on
    the right holding the ball, its key in a room on the left, the other rooms joined by
    ``connect_all``'s random closed doors."""

    room_size: int = 6
    num_rows: int = 3

    @property
    def rooms(self) -> RoomGrid:
        return RoomGrid(self.room_size, num_cols=3, num_rows=self.num_rows)

    def generate(self, key: jax.Array) -> State:
        keys = jax.random.split(key, 9)
        level = self.rooms.generate(keys[0])
        for j in range(1, self.num_rows):
            level = level.remove_wall(1, j, 3)
        locked_row = jax.random.randint(keys[1], (), 0, self.num_rows)
        door_color = random_color(keys[2])
        level, _ = level.add_door(2, locked_row, 2, door_color, locked=True)
        ball_color = random_color(keys[3])
        level, ball_pos = level.place_in_room(keys[4], 2, locked_row, obj_cell(BALL, ball_color))
        key_row = jax.random.randint(keys[5], (), 0, self.num_rows)
        level, _ = level.place_in_room(keys[6], 0, key_row, obj_cell(KEY, door_color))
        level = level.place_agent(keys[7], 1, self.num_rows // 2)
        level = level.connect_all(keys[8])
        return level.to_state((ball_color, BALL), self.max_steps, target_pos=ball_pos)


def key_corridor(room_size: int, num_rows: int) -> KeyCorridor:
    """``MiniGrid-KeyCorridorS{room_size}R{num_rows}-v0``."""
    rooms = RoomGrid(room_size, num_cols=3, num_rows=num_rows)
    return KeyCorridor(
        f"MiniGrid-KeyCorridorS{room_size}R{num_rows}-v0",
        rooms.width,
        rooms.height,
        max_steps=30 * room_size**2,
        room_size=room_size,
        num_rows=num_rows,
    )


TASKS = (key_corridor(room_size=3, num_rows=3),)
