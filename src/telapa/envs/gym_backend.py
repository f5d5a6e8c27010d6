"""The ``gymnasium`` backend: a host vector env with the `JaxEnv` call shape.

`GymVectorEnv` runs N copies of a gymnasium env in a ``gymnasium.vector.SyncVectorEnv``
with same-step autoreset: a `telapa.envs.host.HostVectorEnv` (batched numpy, the
`JaxEnv` call shape, `AutoReset`'s autoreset convention; info entries such as
``features`` and ``success`` belong to the step that ended an episode). The single envs
come from the env's family (`telapa.envs.registry.make` passes its ``make_single``):
MiniGrid ids through ``telapa.envs.minigrid.gym_wrappers.wrap_farama``
(``image``/``direction``/``mission``), MuJoCo ids with the friction regime and the 24-dim sketch
(`telapa.envs.mujoco`), any other env's observation becomes ``{"obs": float32 vector}``
and its behaviour features are that vector (`telapa.envs.generic`).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from telapa.envs.base import ArraySpec, EnvSpec
from telapa.envs.host import HostVectorEnv


def check_gym_id(env_id: str) -> None:
    """Raises ``ValueError`` (with close matches) unless gymnasium knows ``env_id``."""
    import minigrid  # noqa: F401  (registers the Farama MiniGrid ids)

    if env_id not in gymnasium.registry:
        close = difflib.get_close_matches(env_id, list(gymnasium.registry), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ValueError(f"unknown env id {env_id!r} for backend 'gymnasium'{hint}")


def time_limit(env: gymnasium.Env) -> int:
    """The step limit of ``env``'s episodes: its spec's ``max_episode_steps`` (a
    ``TimeLimit`` wrapper), else the env's own ``max_steps`` (MiniGrid's); 0 for none."""
    return int((env.spec.max_episode_steps if env.spec else None)
               or getattr(env.unwrapped, "max_steps", 0) or 0)


ACTION_SPACES = ("telapa's policies take a Discrete action space or a 1-D Box with one "
                 "low and one high bound for every dimension (gymnasium.wrappers."
                 "RescaleAction makes one)")
"""What a ``ValueError`` about an env's action space tells its author."""


def scalar_bound(values: np.ndarray, env_id: str) -> float:
    """The one value of an action space's per-dimension bound ``values``; a
    ``ValueError`` naming ``env_id`` when they differ or are not finite (an unbounded
    Box has no middle or scale for a policy's actions)."""
    if not np.all(values == values.flat[0]):
        raise ValueError(f"{env_id}: per-dimension action bounds {values} are not "
                         f"supported: {ACTION_SPACES}")
    if not np.isfinite(values.flat[0]):
        raise ValueError(f"{env_id}: action bound {values.flat[0]} is not finite (declare "
                         f"the action space with finite bounds): {ACTION_SPACES}")
    return float(values.flat[0])


class GymVectorEnv(HostVectorEnv):
    """N host copies of ``make_single()``, the env ``env_id`` (see module docstring);
    ``spec`` is an `EnvSpec` with the sketch dimension ``feature_dim``. Made by
    `telapa.envs.registry.make` (``make(env_id, "gymnasium", ...)``)."""

    backend = "gymnasium"

    def __init__(
        self,
        env_id: str,
        make_single: Callable[[], gymnasium.Env],
        *,
        feature_dim: int,
        num_envs: int = 8,
        seed: int = 0,
        wrapper: Callable[[gymnasium.Env], gymnasium.Env] | None = None,
    ):
        self.num_envs = num_envs
        self.seed = seed
        wrap = wrapper or (lambda env: env)
        self.envs = SyncVectorEnv(
            [lambda: wrap(make_single()) for _ in range(num_envs)],
            autoreset_mode=AutoresetMode.SAME_STEP,
        )
        obs_space = self.envs.single_observation_space
        act_space = self.envs.single_action_space
        first = self.envs.envs[0]
        try:  # a wrapper that knows its entries' code levels (MiniGrid's) gives its specs
            observation = dict(first.get_wrapper_attr("telapa_observation"))
        except AttributeError:
            observation = {k: ArraySpec(s.shape, s.dtype) for k, s in obs_space.spaces.items()}
        common = dict(
            env_id=env_id,
            observation=observation,
            max_steps=time_limit(first),
            feature_dim=feature_dim,
        )
        if isinstance(act_space, spaces.Discrete):
            self.spec = EnvSpec(n_actions=int(act_space.n), **common)
        elif isinstance(act_space, spaces.Box) and len(act_space.shape) == 1:
            self.spec = EnvSpec(
                action_dim=int(act_space.shape[0]),
                action_low=scalar_bound(act_space.low, env_id),
                action_high=scalar_bound(act_space.high, env_id),
                **common,
            )
        else:
            raise ValueError(f"{env_id}: unsupported action space {act_space}: "
                             f"{ACTION_SPACES}")

    def reset(self, key: Any = None) -> tuple[None, dict[str, np.ndarray]]:
        """Resets all envs: env i with seed ``seed_from(key) + i`` (gymnasium's vector
        seeding)."""
        obs, _ = self.envs.reset(seed=self.seed_from(key))
        return None, obs

    def step(self, state: None, action: Any):
        """Steps every env; see the module docstring for the autoreset convention."""
        action = np.asarray(action)
        self.check_actions(action)
        if self.spec.discrete:
            action = action.astype(np.int64)
        obs, reward, terminated, truncated, raw = self.envs.step(action)
        done = terminated | truncated
        info: dict[str, Any] = {}
        final = raw.get("final_info", {})
        for name in (raw.keys() | final.keys()) - {"final_obs", "final_info"}:
            if name.startswith("_"):
                continue
            # done envs: the ended step's info (a reset's info may lack the entry)
            value = np.array(raw[name] if name in raw else final[name])
            if name in final:
                value[done] = np.asarray(final[name])[done]
            info[name] = value
        final_obs = {k: v.copy() for k, v in obs.items()}
        for i in np.flatnonzero(done):
            for k in final_obs:
                final_obs[k][i] = raw["final_obs"][i][k]
        info["final_obs"] = final_obs
        return None, obs, reward.astype(np.float32), terminated, truncated, info

    def close(self) -> None:
        self.envs.close()


__all__ = ["GymVectorEnv", "check_gym_id", "scalar_bound", "time_limit"]
