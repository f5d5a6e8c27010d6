"""LineWalk: a walker on a line of cells 0 .. ``length`` starts at 0 and steps left or
right; the episode ends when it reaches the goal at ``length`` (reward 2) or when
``limit`` steps have passed (reward 1 on the last step). Every other step gives 0.

Every return is positive, 2 for an episode that reaches the goal and 1 for one that
does not, so telapa's generic env family, which counts a positive return as a success,
would call every episode a success (as it would CartPole's). Two ways to say what
success is, one per curriculum next to this package:

* ``linewalk.yaml`` names the env ``telapa_linewalk:LineWalk-v0`` and sets each task's
  target, ``success: {return_at_least: 2}`` (any env, any family);
* ``linewalk-family.yaml`` names plain ``LineWalk-v0`` and sets nothing: the package's
  env family (`telapa_linewalk.family`, found through its ``telapa.families`` entry
  point) brings the same target as its competence, its own behaviour sketch and a JAX
  port (`telapa_linewalk.jax_port`), so the curriculum runs on the ``jax`` backend.

Either way SR is the share of episodes that reach the goal, SR = mean return - 1.

Importing the module registers ``LineWalk-v0`` with gymnasium, so a curriculum can name
the env as ``telapa_linewalk:LineWalk-v0`` (telapa imports the module first), and its
task options ``{length, limit}`` are the env's keyword arguments.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

GOAL_REWARD = 2.0
"""The reward of the step that reaches the goal (the return of a successful episode)."""
TIMEOUT_REWARD = 1.0
"""The reward of the last step of an episode that runs out of time."""
ID = "LineWalk-v0"
"""The gymnasium id (and the id of the family's JAX port)."""


def check_size(length: int, limit: int) -> None:
    """ValueError unless 1 <= ``length`` <= ``limit`` (the goal can be reached in time)."""
    if not 1 <= length <= limit:
        raise ValueError(f"LineWalk needs 1 <= length <= limit, got length={length}, "
                         f"limit={limit}")


class LineWalk(gymnasium.Env):
    """See the module docstring. Observation: ``[position / length, steps left / limit]``;
    actions: 0 (left, a wall at 0) and 1 (right)."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, length: int = 3, limit: int = 8):
        check_size(length, limit)
        self.length, self.limit = int(length), int(limit)
        self.max_steps = self.limit  # the time limit telapa evaluates with
        self.observation_space = spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.position = self.steps = 0

    def _observation(self) -> np.ndarray:
        # n * (1 / d) in float32, not n / d: the JAX port computes the same product (a
        # compiled program may turn a division by a constant into one, 1 ulp off)
        scale = np.float32(1) / np.array([self.length, self.limit], np.float32)
        return np.array([self.position, self.limit - self.steps], np.float32) * scale

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.position = self.steps = 0
        return self._observation(), {}

    def step(self, action: int):
        self.position = max(0, self.position + (1 if int(action) == 1 else -1))
        self.steps += 1
        reached = self.position >= self.length
        timeout = not reached and self.steps >= self.limit
        reward = GOAL_REWARD if reached else TIMEOUT_REWARD if timeout else 0.0
        return self._observation(), reward, reached, timeout, {}


gymnasium.register(ID, entry_point=LineWalk)

__all__ = ["GOAL_REWARD", "ID", "TIMEOUT_REWARD", "LineWalk", "check_size"]
