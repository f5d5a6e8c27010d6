"""``minigrid.envs.EmptyEnv``: an empty room, the goal in the bottom-right corner."""

from __future__ import annotations

from dataclasses import dataclass

import jax

from telapa.envs.minigrid.layout import put, walled_grid
from telapa.envs.minigrid.objects import GOAL_CELL
from telapa.envs.minigrid.state import State
from telapa.envs.minigrid.task import GOAL_MISSION, Task


@dataclass(frozen=True)
class Empty(Task):
    """The non-random variants: the agent starts at (1, 1) facing right."""

    see_through_walls: bool = True

    def generate(self, key: jax.Array) -> State:
        del key  # deterministic layout
        width, height = self.width, self.height
        grid = put(walled_grid(width, height), (width - 2, height - 2), GOAL_CELL)
        return State.create(grid, (1, 1), 0, GOAL_MISSION, self.max_steps)


TASKS = (Empty("MiniGrid-Empty-5x5-v0", 5, 5, max_steps=4 * 5**2),)
