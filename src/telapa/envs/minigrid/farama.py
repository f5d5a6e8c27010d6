"""Reading a live Farama MiniGrid env: its state as a `State`, its mission as indices.

Nothing here imports Farama's package; objects are read through their public interface
(``encode()``, ``contains``, ``env.grid.get``), so any ``MiniGridEnv`` works.
"""

from __future__ import annotations

import re
from typing import Any

import jax
import numpy as np

from telapa.envs.minigrid.constants import BALL, BOX, COLOR_TO_IDX, KEY, OBJECT_TO_IDX
from telapa.envs.minigrid.features import FLAG_NAMES
from telapa.envs.minigrid.objects import EMPTY_CELL
from telapa.envs.minigrid.state import NO_TARGET, TARGET_CARRIED, TASK_DATA_SIZE, State
from telapa.envs.minigrid.task import Task
from telapa.envs.minigrid.tasks import all_tasks

_OBJECT_WORDS = ("wall", "floor", "door", "key", "ball", "box", "goal", "lava")
_MISSION_OBJECT = re.compile(rf"\b(?:({'|'.join(COLOR_TO_IDX)})\s+)?({'|'.join(_OBJECT_WORDS)})\b")
_HELD_FLAGS = {"has_key": KEY, "has_ball": BALL, "has_box": BOX}
_DEFAULT_COLOR = {  # colours of Farama's constructors, for missions that name none
    "wall": "grey",
    "floor": "blue",
    "key": "blue",
    "ball": "blue",
    "goal": "green",
    "lava": "red",
}


def parse_mission(mission: str) -> tuple[int, int]:
    """``(COLOR_TO_IDX, OBJECT_TO_IDX)`` of the last object the mission names.

    "use the key to open the door and then get to the goal" -> (green, goal);
    "go fetch a red ball" -> (red, ball). Without a colour word, the object's default
    Farama colour is used.
    """
    matches = _MISSION_OBJECT.findall(mission)
    if not matches:
        raise ValueError(f"mission {mission!r} names no object")
    color, obj = matches[-1]
    color = color or _DEFAULT_COLOR.get(obj)
    if color is None:
        raise ValueError(f"mission {mission!r} names no colour for its {obj}")
    return COLOR_TO_IDX[color], OBJECT_TO_IDX[obj]


def encode_obj(obj: Any | None) -> np.ndarray:
    """``obj.encode()`` as uint8 ``(3,)``, `EMPTY_CELL` for ``None``."""
    return EMPTY_CELL if obj is None else np.asarray(obj.encode(), np.uint8)


def locate(env: Any, obj: Any) -> tuple[int, int]:
    """Position of ``obj`` (by identity) in ``env``; `TARGET_CARRIED` / `NO_TARGET`."""
    if obj is None:
        return NO_TARGET
    if env.carrying is obj:
        return TARGET_CARRIED
    for x in range(env.width):
        for y in range(env.height):
            if env.grid.get(x, y) is obj:
                return x, y
    return NO_TARGET


def task_of(env: Any) -> Task:
    """The ported task of a Farama env, by its registered id."""
    unwrapped = env.unwrapped
    env_id = unwrapped.spec.id if unwrapped.spec is not None else None
    tasks = all_tasks()
    if env_id not in tasks:
        raise ValueError(
            f"no JAX port of {env_id or type(unwrapped).__name__!r} (create Farama envs "
            f"with gymnasium.make); ported: {', '.join(sorted(tasks))}"
        )
    return tasks[env_id]


def from_farama(env: Any) -> State:
    """The port's `State` of a live Farama env (wrapped or not), ready to `step`.

    Copies grid, box contents, agent, carried object, step count, ``max_steps`` and
    mission, locates ``env.obj`` as the target when the env has one, and lets the task
    fill its own fields. Of the sticky feature flags only ``has_key`` / ``has_ball`` /
    ``has_box`` can be read off a live env (from what it carries now); the others start
    cleared, which is exact right after ``reset``.
    """
    task = task_of(env)
    env = env.unwrapped
    if (env.width, env.height) != (task.width, task.height):
        raise ValueError(
            f"{task.env_id} is {task.width}x{task.height}, the env is {env.width}x{env.height}"
        )
    contents = np.broadcast_to(EMPTY_CELL, (env.width, env.height, 3)).copy()
    for x in range(env.width):
        for y in range(env.height):
            obj = env.grid.get(x, y)
            if obj is not None and obj.contains is not None:
                contents[x, y] = encode_obj(obj.contains)
    carrying = encode_obj(env.carrying)
    state = State(
        grid=env.grid.encode(),
        contents=contents,
        agent_pos=np.asarray(env.agent_pos, np.int32),
        agent_dir=np.int32(env.agent_dir),
        carrying=carrying,
        carrying_contents=encode_obj(getattr(env.carrying, "contains", None)),
        step_count=np.int32(env.step_count),
        max_steps=np.int32(env.max_steps),
        mission=np.asarray(parse_mission(env.mission), np.int32),
        flags=np.array([_HELD_FLAGS.get(name) == carrying[0] for name in FLAG_NAMES]),
        target_pos=np.asarray(locate(env, getattr(env, "obj", None)), np.int32),
        task_data=np.zeros(TASK_DATA_SIZE, np.int32),
    )
    return task.from_farama(env, jax.device_put(state))
