"""The MiniGrid env family (`telapa.envs.family`): Farama MiniGrid/BabyAI ids, on the
``jax`` backend (the ports) and the ``gymnasium`` backend (Farama, `wrap_farama`).

Sketch: the D = 11 behaviour features of `telapa.envs.minigrid.features`; competence:
success rate (a positive return is MiniGrid's only success); trajectories stored
exactly by `minigrid_codec`; PPO preset ``configs/ppo/minigrid.yaml``. Task option:
``observe_mission`` (bool).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from telapa.envs.family import Competence, SuccessRate, register_family
from telapa.envs.minigrid.features import FEATURE_DIM
from telapa.envs.minigrid.gym_wrappers import is_minigrid_id, wrap_farama

if TYPE_CHECKING:
    import gymnasium

    from telapa.qd.trajectories import FeatureCodec
    from telapa.rl.agent import Agent

OPTIONS = ("observe_mission",)


class MiniGridFamily:
    name = "minigrid"
    train_preset = "minigrid"
    run_preset = "quick"
    count_bonus = True

    def matches(self, env_id: str) -> bool:
        return is_minigrid_id(env_id)

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

    def feature_dim(self, env_id: str) -> int:
        return FEATURE_DIM

    def competence(self, env_id: str) -> Competence:
        return SuccessRate()

    def codec(self, agent: Agent) -> FeatureCodec:
        """`minigrid_codec` (exact) with the grid size of the agent's env and the
        spec's time limit."""
        from telapa.envs.minigrid.env import MiniGrid
        from telapa.qd.trajectories import minigrid_codec

        spec, env = agent.spec, agent.env
        if isinstance(env, MiniGrid):
            return minigrid_codec(env.task.width, env.task.height, spec.max_steps)
        grid = env.envs.envs[0].unwrapped
        return minigrid_codec(grid.width, grid.height, spec.max_steps)


register_family(MiniGridFamily())
