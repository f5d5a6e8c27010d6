"""``minigrid.envs.FetchEnv``: pick up the object the mission names; any pickup ends it."""

from __future__ import annotations

from dataclasses import dataclass, field

import jax

from telapa.envs.minigrid.constants import BALL, KEY
from telapa.envs.minigrid.dynamics import Transition
from telapa.envs.minigrid.objects import is_nothing
from telapa.envs.minigrid.scatter import random_objects, scattered_room
from telapa.envs.minigrid.state import State
from telapa.envs.minigrid.task import Task


@dataclass(frozen=True)
class Fetch(Task):
    """``n_objects`` keys and balls of random colours (repeats allowed) in an open room.

    Farama's ``step``: once the agent carries something, the episode ends, rewarded when
    the object's colour and type are the mission's (any of identical twins will do).
    Which of the five mission phrasings Farama draws does not matter: only the colour
    and type reach `State.mission`.
    """

    n_objects: int = field(kw_only=True)
    see_through_walls: bool = True

    def generate(self, key: jax.Array) -> State:
        objects_key, room_key = jax.random.split(key)
        objects = random_objects(objects_key, (KEY, BALL), self.n_objects, distinct=False)
        room = scattered_room(room_key, self.width, self.height, objects)
        return State.create(room.grid, room.agent_pos, room.agent_dir, room.mission, self.max_steps)

    def rules(
        self, prev: State, action: jax.Array, state: State, transition: Transition
    ) -> tuple[jax.Array, jax.Array]:
        carrying = state.carrying
        holds = ~is_nothing(carrying)
        wanted = (carrying[1] == state.mission[0]) & (carrying[0] == state.mission[1])
        return holds & wanted, holds & ~wanted


TASKS = (Fetch("MiniGrid-Fetch-6x6-N2-v0", 6, 6, max_steps=5 * 6**2, n_objects=2),)
