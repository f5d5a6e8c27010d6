"""``minigrid.envs.RedBlueDoorEnv``: open the red door, then the blue one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from telapa.envs.minigrid.constants import BLUE, CLOSED, DOOR, OPEN, RED
from telapa.envs.minigrid.dynamics import Transition
from telapa.envs.minigrid.farama import locate
from telapa.envs.minigrid.layout import put, region, sample_empty_cell, walled_grid
from telapa.envs.minigrid.objects import WALL_CELL, cell
from telapa.envs.minigrid.state import State
from telapa.envs.minigrid.task import Task

MISSION = (BLUE, DOOR)
""""open the red door then the blue door": the last object named is the blue door."""


def _is_open(state: State, door_pos: jax.Array) -> jax.Array:
    return state.grid[door_pos[0], door_pos[1], 2] == OPEN


@dataclass(frozen=True)
class RedBlueDoors(Task):
    """A ``size x size`` room centred in a ``2 size x size`` grid, doors on its sides.

    ``task_data`` holds the red door's position, then the blue door's (doors never move).
    """

    def generate(self, key: jax.Array) -> State:
        size = self.height
        left, right = size // 2, size // 2 + size - 1  # wall_rect(size // 2, 0, size, size)
        agent_key, dir_key, red_key, blue_key = jax.random.split(key, 4)
        grid = walled_grid(self.width, size)
        grid[[left, right], :] = WALL_CELL
        room = region(self.width, size, (left, 0), (size, size))
        agent_pos = sample_empty_cell(agent_key, grid, room)
        agent_dir = jax.random.randint(dir_key, (), 0, 4)
        red_pos = jnp.stack([left, jax.random.randint(red_key, (), 1, size - 1)])
        blue_pos = jnp.stack([right, jax.random.randint(blue_key, (), 1, size - 1)])
        grid = put(grid, red_pos, cell(DOOR, RED, CLOSED))
        grid = put(grid, blue_pos, cell(DOOR, BLUE, CLOSED))
        return State.create(
            grid,
            agent_pos,
            agent_dir,
            MISSION,
            self.max_steps,
            task_data=jnp.concatenate([red_pos, blue_pos]),
        )

    def rules(
        self, prev: State, action: jax.Array, state: State, transition: Transition
    ) -> tuple[jax.Array, jax.Array]:
        """Farama's checks, on the doors' states before and after the step."""
        red_pos, blue_pos = state.task_data[:2], state.task_data[2:]
        red_before, blue_before = _is_open(prev, red_pos), _is_open(prev, blue_pos)
        red_after, blue_after = _is_open(state, red_pos), _is_open(state, blue_pos)
        success = blue_after & red_before
        failure = (blue_after & ~red_before) | (~blue_after & red_after & blue_before)
        return success, failure

    def from_farama(self, env: Any, state: State) -> State:
        doors = locate(env, env.red_door) + locate(env, env.blue_door)
        return state.replace(task_data=jnp.asarray(doors, jnp.int32))


TASKS = (RedBlueDoors("MiniGrid-RedBlueDoors-8x8-v0", 2 * 8, 8, max_steps=20 * 8**2),)
