"""``minigrid.envs.ObstructedMaze_1Dlhb``: the two-room obstructed mazes.

Registered: ``MiniGrid-ObstructedMaze-1Dlh-v0`` (the key hidden in a box, no blocking
ball).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax

from telapa.envs.minigrid.constants import BALL, BLUE, BOX, GREEN, GREY, KEY
from telapa.envs.minigrid.roomgrid import PickupTask, RoomGrid, obj_cell, random_color
from telapa.envs.minigrid.state import State

ROOMS = RoomGrid(room_size=6, num_cols=2, num_rows=1)
# COLOR_NAMES[0], [1], [2]; Farama's COLOR_NAMES is sorted alphabetically.
BALL_TO_FIND, BLOCKING_BALL, KEY_BOX = BLUE, GREEN, GREY


@dataclass(frozen=True)
class ObstructedMaze1D(PickupTask):
    """A locked door between two rooms, its key (in a grey box if ``key_in_box``; a green
    ball before the door if ``blocked``) in the agent's (left) room, and the blue ball to
    pick up in the right one."""

    key_in_box: bool = True
    blocked: bool = True

    def generate(self, key: jax.Array) -> State:
        keys = jax.random.split(key, 5)
        level = ROOMS.generate(keys[0])
        # _rand_subset(COLOR_NAMES, 6) is a uniform permutation: its first colour is uniform.
        door_color = random_color(keys[1])
        level, door_pos = level.add_door(0, 0, 0, door_color, locked=True)
        if self.blocked:
            level = level.block_door(door_pos, 0, BLOCKING_BALL)
        door_key = obj_cell(KEY, door_color)
        if self.key_in_box:
            level, _ = level.place_in_room(keys[2], 0, 0, obj_cell(BOX, KEY_BOX), door_key)
        else:
            level, _ = level.place_in_room(keys[2], 0, 0, door_key)
        level, ball_pos = level.place_in_room(keys[3], 1, 0, obj_cell(BALL, BALL_TO_FIND))
        level = level.place_agent(keys[4], 0, 0)
        return level.to_state((BALL_TO_FIND, BALL), self.max_steps, target_pos=ball_pos)


TASKS = (
    ObstructedMaze1D(
        "MiniGrid-ObstructedMaze-1Dlh-v0",
        ROOMS.width,
        ROOMS.height,
        max_steps=4 * 2 * 6**2,  # 4 * num_rooms_visited * room_size**2
        key_in_box=True,
        blocked=False,
    ),
)
