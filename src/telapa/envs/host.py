"""`HostVectorEnv`: what every host vector env shares (the ``gymnasium`` and ``native``
backends), with the `JaxEnv` call shape of a batch:

    state, obs = env.reset(key)           # state is None: the envs hold their own state
    state, obs, reward, terminated, truncated, info = env.step(state, actions)

with same-step autoreset as `telapa.envs.AutoReset`: when env i's episode ends,
``obs[i]`` is the first observation of its next episode, ``info["final_obs"][i]`` the
last one of the finished episode, and every other info entry (``features``, ...) belongs
to the step that ended it. Observations are dicts of batched numpy arrays, rewards
float32. Code that runs on any host env (`telapa.rl.gym_agent`, `telapa.rl.rollout`,
`telapa.rl.evaluate`) takes a `HostVectorEnv`.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

import numpy as np

from telapa.envs.base import Backend, EnvSpec


class HostVectorEnv(abc.ABC):
    """N host envs with the batched call shape of the module docstring; ``spec`` is an
    `EnvSpec` with the sketch dimension ``feature_dim``."""

    backend: ClassVar[Backend]
    """The backend the env runs on (``"gymnasium"`` or ``"native"``)."""
    num_envs: int
    seed: int
    """The seed `reset` uses when given no key."""
    spec: EnvSpec

    @abc.abstractmethod
    def reset(self, key: Any = None) -> tuple[None, dict[str, np.ndarray]]:
        """Resets all envs, seeded from ``key`` (a JAX key or an int; None: ``seed``)."""

    @abc.abstractmethod
    def step(self, state: None, action: Any) -> tuple[Any, ...]:
        """Steps every env; see the module docstring for the autoreset convention."""

    @abc.abstractmethod
    def close(self) -> None:
        """Frees the envs' resources."""

    def seed_from(self, key: Any) -> int:
        """The integer seed of ``key``: ``seed`` for None, an int as it is, a JAX key's
        ``randint(key, (), 0, 2**31 - 1)``."""
        if key is None:
            return self.seed
        if isinstance(key, (int, np.integer)):
            return int(key)
        import jax

        return int(jax.random.randint(key, (), 0, 2**31 - 1))

    def check_actions(self, action: np.ndarray, num_envs: int | None = None) -> None:
        """One-line ``ValueError`` naming the env and what is wrong unless ``action`` is a
        batch of ``num_envs`` (default: all) valid actions of ``spec``."""
        spec = self.spec
        n = self.num_envs if num_envs is None else num_envs
        expected = (n,) if spec.discrete else (n, spec.action_dim)
        if action.shape != expected:
            raise ValueError(f"{spec.env_id}: expected actions of shape {expected}, got "
                             f"{action.shape}")
        if spec.discrete:
            bad = (action < 0) | (action >= spec.n_actions) | (action != np.floor(action))
            valid = f"integers 0..{spec.n_actions - 1}"
        else:
            bad = ~((action >= spec.action_low) & (action <= spec.action_high)).all(axis=-1)
            valid = f"[{spec.action_low}, {spec.action_high}]"
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"{spec.env_id}: action {action[i].tolist()} for env {i} is out of range; "
                f"valid actions are {valid}"
            )


__all__ = ["HostVectorEnv"]
