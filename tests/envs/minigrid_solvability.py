"""Whether MiniGrid levels can be solved: a reachability fixpoint over the grid.

`solvable` grows the set of cells the agent can reach from its start, as long as it
grows, with what the agent can do to the cells next to that set (the cells it can
face):

- walk onto empty cells, goals, floors and doors: open or closed ones (``toggle``
  opens them), and locked ones once a key of their colour was obtained (``Door.toggle``
  unlocks with it and the key is kept, so one key opens every door of its colour);
- with ``movable`` objects, pick up a key, ball or box and put it out of the way, which
  frees its cell; a key obtained this way, or found in a box obtained this way
  (``toggle`` replaces a box by its contents), opens the doors of its colour;
- never step on walls or lava; without ``movable`` objects, keys, balls and boxes are
  fixed obstacles.

The level is solvable when the agent can face its objective: a goal when the mission
is `GOAL_MISSION`; else the target (`State.target_pos`) when there is one; else any
object matching the mission's (colour, type).

Assumed, and true of every ported id: the agent can always empty its hands by dropping
what it carries on a free reachable cell out of the way, and no object must be brought
to a particular place. The set then only grows, so the fixpoint decides solvability
exactly. ``movable`` is false where picking up an object the mission does not name ends
the episode (Fetch); `pickups_end_episode` asks the task's rules.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from telapa.envs.minigrid import GOAL_MISSION, State, Task
from telapa.envs.minigrid.constants import (
    BALL,
    BOX,
    COLOR_TO_IDX,
    DOOR,
    EMPTY,
    FLOOR,
    GOAL,
    KEY,
    LOCKED,
    Action,
)
from telapa.envs.minigrid.dynamics import Transition
from telapa.envs.minigrid.objects import EMPTY_CELL, cell

N_COLORS = len(COLOR_TO_IDX)


def _neighbours(mask: np.ndarray) -> np.ndarray:
    """Cells 4-adjacent to a cell of ``mask`` (``(n, W, H)``)."""
    out = np.zeros_like(mask)
    out[:, 1:] |= mask[:, :-1]
    out[:, :-1] |= mask[:, 1:]
    out[:, :, 1:] |= mask[:, :, :-1]
    out[:, :, :-1] |= mask[:, :, 1:]
    return out


def _objective(levels: State) -> np.ndarray:
    """bool ``(n, W, H)``: the cells the agent must face to succeed."""
    grid, mission = np.asarray(levels.grid), np.asarray(levels.mission)
    n, width, height = grid.shape[:3]
    matches = (grid[..., 1] == mission[:, 0, None, None]) & (
        grid[..., 0] == mission[:, 1, None, None]
    )
    goal_mission = np.all(mission == GOAL_MISSION, axis=1)
    goals = grid[..., 0] == GOAL
    target = np.asarray(levels.target_pos)
    has_target = target[:, 0] >= 0
    at_target = np.zeros((n, width, height), bool)
    at_target[np.flatnonzero(has_target), target[has_target, 0], target[has_target, 1]] = True
    chosen = np.where(has_target[:, None, None], at_target, matches)
    return np.where(goal_mission[:, None, None], goals, chosen)


def solvable(levels: State, movable: bool = True) -> np.ndarray:
    """bool ``(n,)`` for a batch of levels (a `State` with a leading level axis)."""
    grid, contents = np.asarray(levels.grid), np.asarray(levels.contents)
    n, width, height = grid.shape[:3]
    kind, color, door_state = grid[..., 0], grid[..., 1], grid[..., 2]
    levels_ix = np.arange(n)
    agent = np.asarray(levels.agent_pos)
    reach = np.zeros((n, width, height), bool)
    reach[levels_ix, agent[:, 0], agent[:, 1]] = True
    keys = np.zeros((n, N_COLORS), bool)  # key colours obtained
    walkable = np.isin(kind, (EMPTY, FLOOR, GOAL)) | ((kind == DOOR) & (door_state != LOCKED))
    takeable = movable & np.isin(kind, (KEY, BALL, BOX))
    while True:
        front = _neighbours(reach) & ~reach
        taken = front & takeable
        for layer in (grid, contents):  # keys taken, and keys in boxes taken
            got = taken & (layer[..., 0] == KEY)
            keys[np.nonzero(got)[0], layer[..., 1][got]] = True
        unlocked = (kind == DOOR) & (door_state == LOCKED) & keys[levels_ix[:, None, None], color]
        grown = reach | (front & (walkable | taken | unlocked))
        if np.array_equal(grown, reach):
            break
        reach = grown
    return np.any(_objective(levels) & _neighbours(reach), axis=(1, 2))


def pickups_end_episode(task: Task, level: State) -> bool:
    """Whether ``task``'s rules fail a step that picks up an object the mission does
    not name (Fetch's ``step``), asked on one generated ``level`` (unbatched)."""
    level = jax.tree.map(jnp.asarray, level)
    mission_color, mission_type = (int(v) for v in level.mission)
    other = cell(BALL if mission_type != BALL else KEY, (mission_color + 1) % N_COLORS)
    picked = level.replace(carrying=jnp.asarray(other), step_count=level.step_count + 1)
    transition = Transition(
        front_before=jnp.asarray(other),
        front_after=jnp.asarray(EMPTY_CELL),
        reached_goal=jnp.bool_(False),
        entered_lava=jnp.bool_(False),
    )
    _, failure = task.rules(level, jnp.int32(Action.PICKUP), picked, transition)
    return bool(failure)
