"""The MiniGrid env family (`telapa.envs.family`): Farama MiniGrid/BabyAI ids, on the
``jax`` backend (the ports of `telapa.envs.minigrid.tasks`) and the ``gymnasium``
backend (Farama, `wrap_farama`).

Sketch: the D = 11 behaviour features of `telapa.envs.minigrid.features`; competence:
success rate (a positive return is MiniGrid's only success); trajectories stored
exactly by `minigrid_codec`; PPO preset ``configs/ppo/minigrid.yaml``. Task option:
``observe_mission`` (bool).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from telapa.envs.family import EnvFamily
from telapa.envs.minigrid.env import MiniGrid
from telapa.envs.minigrid.features import FEATURE_DIM, minigrid_codec
from telapa.envs.minigrid.gym_wrappers import is_minigrid_id, wrap_farama
from telapa.envs.minigrid.task import Task
from telapa.envs.minigrid.tasks import all_tasks

if TYPE_CHECKING:
    import gymnasium

    from telapa.envs.base import EnvSpec
    from telapa.qd.trajectories import FeatureCodec

OPTIONS = ("observe_mission",)


@functools.cache
def _ports() -> dict[str, Task]:
    return all_tasks()


@functools.cache
def grid_size(env_id: str) -> tuple[int, int]:
    """(W, H) of ``env_id``'s grid: the port's, else the one Farama's env is built with."""
    task = _ports().get(env_id)
    if task is not None:
        return task.width, task.height
    import gymnasium

    env = gymnasium.make(env_id)
    try:
        return int(env.unwrapped.width), int(env.unwrapped.height)
    finally:
        env.close()


class MiniGridFamily(EnvFamily):
    """See the module docstring; the success rate is `EnvFamily`'s default
    competence."""

    name = "minigrid"
    train_preset = "minigrid"
    run_preset = "quick"
    count_bonus = True

    def matches(self, env_id: str) -> bool:
        return env_id in _ports() or is_minigrid_id(env_id)

    def check_options(self, env_id: str, options: dict[str, Any]) -> None:
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise ValueError(f"{env_id}: unknown MiniGrid task option(s) {', '.join(unknown)}; "
                             f"valid: {', '.join(OPTIONS)}")

    def make_single(self, env_id: str, options: dict[str, Any]) -> gymnasium.Env:
        import gymnasium

        options = dict(options)
        observe_mission = options.pop("observe_mission", True)
        return wrap_farama(gymnasium.make(env_id, **options), observe_mission)

    def jax_ids(self) -> tuple[str, ...]:
        return tuple(_ports())

    def make_jax(self, env_id: str, options: dict[str, Any]) -> MiniGrid:
        return MiniGrid(_ports()[env_id], **options)

    def feature_dim(self, env_id: str) -> int:
        return FEATURE_DIM

    def codec(self, spec: EnvSpec) -> FeatureCodec:
        """`minigrid_codec` (exact) with the env's grid size and the spec's time limit."""
        width, height = grid_size(spec.env_id)
        return minigrid_codec(width, height, spec.max_steps)
