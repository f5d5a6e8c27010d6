"""``minigrid.envs.GoToObjectEnv``: ``done`` next to the object the mission names."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp

from telapa.envs.minigrid.constants import BALL, BOX, KEY, Action
from telapa.envs.minigrid.dynamics import Transition
from telapa.envs.minigrid.scatter import random_objects, scattered_room
from telapa.envs.minigrid.state import TASK_DATA_SIZE, State
from telapa.envs.minigrid.task import Task


@dataclass(frozen=True)
class GoToObject(Task):
    """``n_objects`` objects of distinct (type, colour) anywhere in an open room.

    Farama fixes ``target_pos`` at generation: ``done`` pays when the agent is next to
    that cell even if the object was carried away (and not if it is next to the moved
    object). ``done`` elsewhere and ``toggle`` end the episode with nothing.
    ``task_data[:2]`` holds ``target_pos``.
    """

    n_objects: int = field(kw_only=True)
    see_through_walls: bool = True

    def generate(self, key: jax.Array) -> State:
        objects_key, room_key = jax.random.split(key)
        objects = random_objects(objects_key, (KEY, BALL, BOX), self.n_objects, distinct=True)
        room = scattered_room(room_key, self.width, self.height, objects)
        task_data = jnp.zeros(TASK_DATA_SIZE, jnp.int32).at[:2].set(room.target_pos)
        return State.create(
            room.grid,
            room.agent_pos,
            room.agent_dir,
            room.mission,
            self.max_steps,
            task_data=task_data,
        )

    def rules(
        self, prev: State, action: jax.Array, state: State, transition: Transition
    ) -> tuple[jax.Array, jax.Array]:
        done = action == Action.DONE
        next_to_target = jnp.abs(state.agent_pos - state.task_data[:2]).sum() == 1
        return done & next_to_target, (done & ~next_to_target) | (action == Action.TOGGLE)

    def from_farama(self, env: Any, state: State) -> State:
        return state.replace(task_data=state.task_data.at[:2].set(jnp.asarray(env.target_pos)))


TASKS = (GoToObject("MiniGrid-GoToObject-8x8-N2-v0", 8, 8, max_steps=5 * 8**2, n_objects=2),)
