"""The ported tasks, one module per Farama env family.

Every module here defines ``TASKS``, a tuple of `Task` instances; modules are found
automatically, so adding a task is adding a file.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

from telapa.envs.minigrid.task import Task


@functools.cache
def all_tasks() -> dict[str, Task]:
    """Every ported task by Farama id."""
    tasks: dict[str, Task] = {}
    for module_info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        for task in module.TASKS:
            if task.env_id in tasks:
                raise ValueError(f"task {task.env_id!r} is defined twice")
            tasks[task.env_id] = task
    return tasks
