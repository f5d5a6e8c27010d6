"""``minigrid.envs.BlockedUnlockPickupEnv``: move the ball, unlock the door, get the box."""

from __future__ import annotations

from dataclasses import dataclass

import jax

from telapa.envs.minigrid.constants import BOX, KEY
from telapa.envs.minigrid.roomgrid import PickupTask, RoomGrid, obj_cell, random_color
from telapa.envs.minigrid.state import State

ROOMS = RoomGrid(room_size=6, num_cols=2, num_rows=1)


@dataclass(frozen=True)
class BlockedUnlockPickup(PickupTask):
    """Two rooms joined by a locked door, a ball blocking it on the agent's side, the key
    in the agent's (left) room and the target box in the right one."""

    def generate(self, key: jax.Array) -> State:
        keys = jax.random.split(key, 7)
        level = ROOMS.generate(keys[0])
        box_color = random_color(keys[1])
        level, box_pos = level.place_in_room(keys[2], 1, 0, obj_cell(BOX, box_color))
        door_color = random_color(keys[3])
        level, door_pos = level.add_door(0, 0, 0, door_color, locked=True)
        level = level.block_door(door_pos, 0, random_color(keys[4]))
        level, _ = level.place_in_room(keys[5], 0, 0, obj_cell(KEY, door_color))
        level = level.place_agent(keys[6], 0, 0)
        return level.to_state((box_color, BOX), self.max_steps, target_pos=box_pos)


TASKS = (
    BlockedUnlockPickup(
        "MiniGrid-BlockedUnlockPickup-v0", ROOMS.width, ROOMS.height, max_steps=16 * 6**2
    ),
)
