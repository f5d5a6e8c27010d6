"""The task hook API: what distinguishes one MiniGrid env from another."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from telapa.envs.minigrid.constants import GOAL, GREEN
from telapa.envs.minigrid.dynamics import Transition
from telapa.envs.minigrid.state import State

GOAL_MISSION = (GREEN, GOAL)
"""Mission of the "get to the (green) goal" tasks (Empty, DoorKey, MultiRoom, ...)."""


@dataclass(frozen=True)
class Task(ABC):
    """One Farama MiniGrid env: level generator, extra rules, and Farama conversion.

    Attributes:
        env_id: the Farama id, e.g. ``"MiniGrid-DoorKey-8x8-v0"``.
        width, height: the grid size including the outer walls.
        max_steps: Farama's default ``max_steps`` for the id.
        see_through_walls: Farama's flag for the env class (``EmptyEnv``, ``FetchEnv``
            and ``GoToObjectEnv`` set it ``True``).
    """

    env_id: str
    width: int
    height: int
    max_steps: int
    see_through_walls: bool = False

    @abstractmethod
    def generate(self, key: jax.Array) -> State:
        """``_gen_grid``: a fresh episode's state, drawn from Farama's distribution."""

    def rules(
        self, prev: State, action: jax.Array, state: State, transition: Transition
    ) -> tuple[jax.Array, jax.Array]:
        """The env's ``step`` override: ``(success, failure)`` of a step, bool scalars.

        Called after the core dynamics moved ``prev`` to ``state``. Success (rewarded
        ``1 - 0.9 * step_count / max_steps``) and failure both terminate; they add to
        the core's own events (goal reached: success, lava entered: failure). The
        default adds nothing.
        """
        del prev, action, state, transition
        return jnp.bool_(False), jnp.bool_(False)

    def from_farama(self, env: Any, state: State) -> State:
        """Fills the task's own fields of ``state`` (e.g. `State.task_data`).

        ``state`` was built by the core from the unwrapped Farama env ``env``: grid,
        agent, carried object, step count, mission, and ``target_pos`` (the position of
        ``env.obj`` when the env has one). The default keeps it as is.
        """
        del env
        return state
