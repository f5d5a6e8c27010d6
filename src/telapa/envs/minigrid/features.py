"""Behaviour features of a MiniGrid step (paper eq. traj_feat_vector).

The D = 11 float32 features of a step are

    [x/(W-1), y/(H-1), dir/3, step_count/max_steps, action/(n_actions-1),
     has_key, has_ball, has_box, door_open, box_toggled, delivered]

with the post-step agent position, direction and step count and the executed action,
each of the first five clipped to [0, 1]. The six flags are sticky within an episode:

- ``has_key`` / ``has_ball`` / ``has_box``: the agent has carried an object of that type
  at the end of some step of the episode (so: it picked one up).
- ``door_open``: some step's ``toggle`` turned a closed or locked door into an open one.
- ``box_toggled``: some step's ``toggle`` opened a box (replacing it by its contents).
- ``delivered``: the task's success event happened (the step that earned the reward).

The functions take the array module ``xp`` (``numpy`` or ``jax.numpy``) so that the JAX
port and the gymnasium wrapper around Farama's env compute bit-identical features from
the same formulas. Divisions by constants are written as multiplications by float32
reciprocals, the form XLA rewrites them to, so both backends round alike.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from telapa.envs.minigrid.constants import BALL, BOX, DOOR, KEY, N_ACTIONS, OPEN, Action

if TYPE_CHECKING:
    from telapa.qd.trajectories import FeatureCodec

FLAG_NAMES = ("has_key", "has_ball", "has_box", "door_open", "box_toggled", "delivered")
N_FLAGS = len(FLAG_NAMES)
FEATURE_NAMES = ("x", "y", "direction", "time", "action", *FLAG_NAMES)
FEATURE_DIM = len(FEATURE_NAMES)

Array = Any  # a numpy or jax array


def step_flags(
    xp: ModuleType,
    action: Array,
    front_before: Array,
    front_after: Array,
    carrying: Array,
    success: Array,
) -> Array:
    """The flag events of one step, in `FLAG_NAMES` order (bool ``(N_FLAGS,)``).

    ``front_before`` / ``front_after`` are the encoded cell in front of the agent before
    the step and that same cell after it; ``carrying`` is the post-step carried object.
    """
    toggled = action == Action.TOGGLE
    door_opened = (
        toggled
        & (front_before[0] == DOOR)
        & (front_before[2] != OPEN)
        & (front_after[0] == DOOR)
        & (front_after[2] == OPEN)
    )
    box_opened = toggled & (front_before[0] == BOX)
    held = carrying[0]
    return xp.stack([held == KEY, held == BALL, held == BOX, door_opened, box_opened, success])


@functools.cache
def _recip(n: int) -> np.float32:
    return np.float32(1) / np.float32(n)


def feature_vector(
    xp: ModuleType,
    agent_pos: Array,
    agent_dir: Array,
    step_count: Array,
    max_steps: Array,
    action: Array,
    flags: Array,
    width: int,
    height: int,
) -> Array:
    """The float32 ``(FEATURE_DIM,)`` feature vector of a step (see the module doc)."""
    f32 = np.float32
    continuous = xp.stack(
        [
            agent_pos[0].astype(f32) * _recip(width - 1),
            agent_pos[1].astype(f32) * _recip(height - 1),
            agent_dir.astype(f32) * _recip(3),
            step_count.astype(f32) * (f32(1) / max_steps.astype(f32)),
            action.astype(f32) * _recip(N_ACTIONS - 1),
        ]
    )
    return xp.concatenate([xp.clip(continuous, f32(0), f32(1)), flags.astype(f32)])


def minigrid_codec(width: int, height: int, max_steps: int,
                   n_actions: int = N_ACTIONS) -> FeatureCodec:
    """How the features of a ``width x height`` grid with time limit ``max_steps`` are
    stored: exactly, as the numerators of x/(W-1), y/(H-1), dir/3, step/max_steps,
    action/(n_actions-1) and of the six 0/1 flags (`telapa.qd.trajectories.FeatureCodec`
    decodes them bit-identically to `feature_vector`'s float32 values)."""
    from telapa.qd.trajectories import FeatureCodec

    dens = (max(width - 1, 1), max(height - 1, 1), 3, max_steps, max(n_actions - 1, 1))
    return FeatureCodec((*dens, *(1,) * N_FLAGS))
