"""``minigrid.envs.DoorKeyEnv``: fetch the key, unlock the door, reach the goal."""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from telapa.envs.minigrid.constants import DOOR, KEY, LOCKED, YELLOW
from telapa.envs.minigrid.layout import put, rand_ints, region, sample_empty_cell, walled_grid
from telapa.envs.minigrid.objects import GOAL_CELL, WALL_CELL, cell
from telapa.envs.minigrid.state import State
from telapa.envs.minigrid.task import GOAL_MISSION, Task


@dataclass(frozen=True)
class DoorKey(Task):
    """A wall splits the room; a locked yellow door in it, the yellow key on the left."""

    def generate(self, key: jax.Array) -> State:
        width, height = self.width, self.height
        ints_key, agent_key, obj_key = jax.random.split(key, 3)
        # Farama's _rand_int draws: split column, direction, door row.
        split, agent_dir, door_y = rand_ints(ints_key, (2, 0, 1), (width - 2, 4, height - 2))
        grid = put(walled_grid(width, height), (width - 2, height - 2), GOAL_CELL)
        column = jnp.arange(width)[:, None, None] == split
        grid = jnp.where(column, jnp.asarray(WALL_CELL), grid)
        left = region(width, height, (0, 0), (split, height))
        agent_pos = sample_empty_cell(agent_key, grid, left)
        grid = put(grid, (split, door_y), cell(DOOR, YELLOW, LOCKED))
        key_pos = sample_empty_cell(obj_key, grid, left, avoid=agent_pos)
        grid = put(grid, key_pos, cell(KEY, YELLOW))
        return State.create(grid, agent_pos, agent_dir, GOAL_MISSION, self.max_steps)


TASKS = (
    DoorKey("MiniGrid-DoorKey-5x5-v0", 5, 5, max_steps=10 * 5**2),
    DoorKey("MiniGrid-DoorKey-8x8-v0", 8, 8, max_steps=10 * 8**2),
)
