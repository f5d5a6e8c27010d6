"""The port's environment state: Farama's ``MiniGridEnv`` attributes as arrays."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from telapa.envs.minigrid.features import N_FLAGS
from telapa.envs.minigrid.objects import EMPTY_CELL

TASK_DATA_SIZE = 4
"""Length of `State.task_data`, the int32 slot a task may fill as it likes."""

TARGET_CARRIED = (-1, -1)
"""`State.target_pos` while the agent carries the target (Farama sets ``cur_pos`` so)."""
NO_TARGET = (-2, -2)
"""`State.target_pos` of a task without a target, or after the target box was opened."""


@struct.dataclass
class State:
    """One MiniGrid episode's state.

    Attributes:
        grid: uint8 ``(W, H, 3)``, Farama's ``grid.encode()`` (type, colour, state),
            indexed ``[x, y]``; the agent is not drawn in it.
        contents: uint8 ``(W, H, 3)``, the encoded object inside the box at ``[x, y]``
            (Farama's ``Box.contains``), ``EMPTY_CELL`` elsewhere. Boxes nest one level.
        agent_pos: int32 ``(2,)``, ``(x, y)``.
        agent_dir: int32, 0 right, 1 down, 2 left, 3 up.
        carrying: uint8 ``(3,)``, the carried object's encoding; ``EMPTY_CELL``
            (type 1, "empty") when the hands are empty.
        carrying_contents: uint8 ``(3,)``, the contents of a carried box.
        step_count: int32, steps taken this episode.
        max_steps: int32, the step at which the episode is truncated.
        mission: int32 ``(2,)``, ``(COLOR_TO_IDX, OBJECT_TO_IDX)`` of the mission's object.
        flags: bool ``(N_FLAGS,)``, the sticky feature flags (`features.FLAG_NAMES`).
        target_pos: int32 ``(2,)``, where the task's target object is (Farama's
            ``self.obj``, compared by identity); the core keeps it up to date through
            pickup, drop and box opening. `TARGET_CARRIED` while carried, `NO_TARGET`
            when there is none.
        task_data: int32 ``(TASK_DATA_SIZE,)``, free for the task (e.g. a fixed target
            position); the core never reads or writes it.
    """

    grid: jax.Array
    contents: jax.Array
    agent_pos: jax.Array
    agent_dir: jax.Array
    carrying: jax.Array
    carrying_contents: jax.Array
    step_count: jax.Array
    max_steps: jax.Array
    mission: jax.Array
    flags: jax.Array
    target_pos: jax.Array
    task_data: jax.Array

    @classmethod
    def create(
        cls,
        grid: jax.Array,
        agent_pos: jax.Array,
        agent_dir: jax.Array,
        mission: tuple[int, int] | jax.Array,
        max_steps: int | jax.Array,
        *,
        contents: jax.Array | None = None,
        target_pos: tuple[int, int] | jax.Array = NO_TARGET,
        task_data: jax.Array | None = None,
    ) -> State:
        """A state at the start of an episode: nothing carried, no step taken, no flag."""
        grid = jnp.asarray(grid, jnp.uint8)
        if contents is None:
            contents = jnp.broadcast_to(jnp.asarray(EMPTY_CELL), grid.shape)
        if task_data is None:
            task_data = jnp.zeros(TASK_DATA_SIZE, jnp.int32)
        return cls(
            grid=grid,
            contents=jnp.asarray(contents, jnp.uint8),
            agent_pos=jnp.asarray(agent_pos, jnp.int32),
            agent_dir=jnp.asarray(agent_dir, jnp.int32),
            carrying=jnp.asarray(EMPTY_CELL),
            carrying_contents=jnp.asarray(EMPTY_CELL),
            step_count=jnp.zeros((), jnp.int32),
            max_steps=jnp.asarray(max_steps, jnp.int32),
            mission=jnp.asarray(mission, jnp.int32),
            flags=jnp.zeros(N_FLAGS, bool),
            target_pos=jnp.asarray(target_pos, jnp.int32),
            task_data=jnp.asarray(task_data, jnp.int32),
        )


def is_carrying_target(state: State) -> jax.Array:
    """Farama's ``self.carrying is self.obj`` (e.g. KeyCorridor's success test)."""
    return jnp.all(state.target_pos == np.asarray(TARGET_CARRIED))
