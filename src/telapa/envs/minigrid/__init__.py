"""Faithful JAX ports of Farama MiniGrid tasks.

``telapa.envs.make("MiniGrid-DoorKey-8x8-v0")`` returns a `MiniGrid` env: pure
``reset(key)`` / ``step(state, action)`` functions over a `State`, bit-identical to
Farama's ``MiniGridEnv`` in observations, rewards, terminations and carried objects
(tests/envs/test_minigrid_differential.py checks this step by step against Farama).

Layout:
    constants     Farama's encodings and actions.
    objects       ``WorldObj`` behaviour on encoded ``(type, colour, state)`` cells.
    state         `State`, the episode state.
    dynamics      ``MiniGridEnv.step``'s seven actions (`step_dynamics`).
    observation   ``gen_obs``: the egocentric 7x7 image with occlusion.
    features      the 11 behaviour features and their sticky flags.
    layout        level-generation helpers (walls, ``place_obj``, ``_rand_int``).
    roomgrid      ``RoomGrid`` levels; scatter: objects strewn over a room (task helpers).
    task          `Task`, the per-env hook API.
    tasks/        one module per env family; each defines ``TASKS``.
    env           `MiniGrid`, the `JaxEnv` tying a task to the core.
    farama        `from_farama`: a live Farama env's state as a `State`.
    gym_wrappers  `wrap_farama`: Farama envs emitting the port's obs, features, success.
    family        `MiniGridFamily`, the env family (`telapa.envs.family`) of these ids.
    render        `render.render`: states as Farama's ``rgb_array`` pictures, batched.

Adding a task: write ``tasks/<name>.py`` with a frozen dataclass subclassing `Task` and
a module-level ``TASKS = (MyTask(env_id, width, height, max_steps), ...)``; it is found
automatically (`all_tasks`, which the MiniGrid env family, `family`, serves). The hooks:

- ``generate(self, key) -> State``: ``_gen_grid``, drawn from Farama's distribution;
  build it with `State.create` and the helpers of `layout`.
- ``rules(self, prev, action, state, transition) -> (success, failure)``: the env's
  ``step`` override, evaluated after the core dynamics moved ``prev`` to ``state``
  (``transition`` holds the front cell before and after, see `Transition`); bool
  scalars, default none. Success is rewarded ``1 - 0.9 * step_count / max_steps``; both
  terminate. The core already makes reaching a goal a success and entering lava a
  failure.
- ``from_farama(self, env, state) -> State``: fill the task's own fields from the
  unwrapped Farama env (default: nothing to fill).

Task-specific data lives in `State.task_data` (int32, free for the task) and
`State.target_pos`: the position of Farama's ``env.obj`` for identity-based success
(``self.carrying == self.obj``), kept up to date by the core (`TARGET_CARRIED` while
carried; see `is_carrying_target`). ``mission`` holds the indices of the last object the
mission string names (`farama.parse_mission`): goal-reaching tasks use `GOAL_MISSION`.

Conventions: an empty cell and empty hands are ``(1, 0, 0)`` ("empty"), as
``Grid.encode`` writes ``None``. Out-of-range actions are no-ops that still count as a
step (Farama raises). ``info["success"]`` is the task's success event; the gymnasium
wrapper reads it as a positive reward, Farama's only way of signalling success.
"""

from __future__ import annotations

from telapa.envs.minigrid.dynamics import Transition
from telapa.envs.minigrid.env import MiniGrid
from telapa.envs.minigrid.farama import from_farama
from telapa.envs.minigrid.features import FEATURE_DIM, FEATURE_NAMES, FLAG_NAMES
from telapa.envs.minigrid.state import (
    NO_TARGET,
    TARGET_CARRIED,
    TASK_DATA_SIZE,
    State,
    is_carrying_target,
)
from telapa.envs.minigrid.task import GOAL_MISSION, Task
from telapa.envs.minigrid.tasks import all_tasks

__all__ = [
    "FEATURE_DIM",
    "FEATURE_NAMES",
    "FLAG_NAMES",
    "GOAL_MISSION",
    "NO_TARGET",
    "TARGET_CARRIED",
    "TASK_DATA_SIZE",
    "MiniGrid",
    "State",
    "Task",
    "Transition",
    "all_tasks",
    "from_farama",
    "is_carrying_target",
]
