"""``MiniGridEnv.step`` without the task rules: the seven actions on a `State`.

Mirrors ``minigrid.minigrid_env.MiniGridEnv.step`` and the ``toggle`` methods of
``Door`` and ``Box``:

- ``left`` / ``right`` turn; ``forward`` moves into the front cell when it
  ``can_overlap`` (empty, floor, goal, lava, open door);
- ``pickup`` takes a key, ball or box when the hands are empty;
- ``drop`` puts the carried object into an empty front cell;
- ``toggle`` opens/closes an unlocked door, unlocks (and opens) a locked door when the
  carried object is a key of the door's colour (the key is kept), and replaces a box by
  its contents (or nothing);
- ``done`` does nothing. Out-of-range actions also do nothing (Farama raises instead);
  like every action they still count as a step.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from telapa.envs.minigrid.constants import (
    BOX,
    CLOSED,
    DIR_TO_VEC,
    DOOR,
    GOAL,
    KEY,
    LAVA,
    LOCKED,
    OPEN,
    Action,
)
from telapa.envs.minigrid.objects import EMPTY_CELL, can_overlap, can_pickup, is_nothing
from telapa.envs.minigrid.state import NO_TARGET, TARGET_CARRIED, State


@struct.dataclass
class Transition:
    """What happened in a step, for task rules and features.

    Attributes:
        front_before: uint8 ``(3,)``, the cell in front of the agent before the step.
        front_after: uint8 ``(3,)``, that same cell after the step.
        reached_goal: bool, ``forward`` into a goal (Farama: terminated with reward).
        entered_lava: bool, ``forward`` into lava (Farama: terminated, no reward).
    """

    front_before: jax.Array
    front_after: jax.Array
    reached_goal: jax.Array
    entered_lava: jax.Array


def _toggled_door(door: jax.Array, carrying: jax.Array) -> jax.Array:
    """``Door.toggle``: a locked door opens only for a key of its colour."""
    has_its_key = (carrying[0] == KEY) & (carrying[1] == door[1])
    state = door[2]
    new_state = jnp.where(
        state == LOCKED,
        jnp.where(has_its_key, OPEN, LOCKED),
        jnp.where(state == OPEN, CLOSED, OPEN),
    )
    return door.at[2].set(new_state.astype(door.dtype))


def step_dynamics(state: State, action: jax.Array) -> tuple[State, Transition]:
    """Applies ``action`` to an unbatched ``state``; counts the step (no truncation)."""
    action = jnp.asarray(action, jnp.int32)
    width, height = state.grid.shape[:2]
    front_pos = state.agent_pos + jnp.asarray(DIR_TO_VEC)[state.agent_dir]
    # Every MiniGrid grid is walled in, so the front cell is inside; clipping only
    # keeps the index arithmetic safe.
    fx = jnp.clip(front_pos[0], 0, width - 1)
    fy = jnp.clip(front_pos[1], 0, height - 1)
    front = state.grid[fx, fy]
    inside = state.contents[fx, fy]
    carrying = state.carrying
    hands_empty = is_nothing(carrying)
    empty = jnp.asarray(EMPTY_CELL)

    forward = action == Action.FORWARD
    moved = forward & can_overlap(front)
    picked = (action == Action.PICKUP) & can_pickup(front) & hands_empty
    dropped = (action == Action.DROP) & is_nothing(front) & ~hands_empty
    toggled = action == Action.TOGGLE
    door_toggled = toggled & (front[0] == DOOR)
    box_opened = toggled & (front[0] == BOX)

    front_after = jnp.select(
        [picked, dropped, door_toggled, box_opened],
        [empty, carrying, _toggled_door(front, carrying), inside],
        front,
    )
    inside_after = jnp.where(
        dropped, state.carrying_contents, jnp.where(picked | box_opened, empty, inside)
    )

    turn = jnp.where(action == Action.LEFT, 3, jnp.where(action == Action.RIGHT, 1, 0))
    at_target = jnp.all(front_pos == state.target_pos)
    carrying_target = jnp.all(state.target_pos == np.asarray(TARGET_CARRIED))
    target_pos = jnp.select(
        [picked & at_target, dropped & carrying_target, box_opened & at_target],
        [jnp.asarray(TARGET_CARRIED), front_pos, jnp.asarray(NO_TARGET)],
        state.target_pos,
    )

    new_state = state.replace(
        grid=state.grid.at[fx, fy].set(front_after),
        contents=state.contents.at[fx, fy].set(inside_after),
        agent_pos=jnp.where(moved, front_pos, state.agent_pos),
        agent_dir=(state.agent_dir + turn) % 4,
        carrying=jnp.where(picked, front, jnp.where(dropped, empty, carrying)),
        carrying_contents=jnp.where(
            picked, inside, jnp.where(dropped, empty, state.carrying_contents)
        ),
        step_count=state.step_count + 1,
        target_pos=target_pos.astype(jnp.int32),
    )
    transition = Transition(
        front_before=front,
        front_after=front_after,
        reached_goal=forward & (front[0] == GOAL),
        entered_lava=forward & (front[0] == LAVA),
    )
    return new_state, transition
