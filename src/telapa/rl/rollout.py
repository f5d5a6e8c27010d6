"""Rollouts: T steps of N envs into a `Trajectory`, on either backend.

Both use the same ``act`` (`Policy.act`) and produce identical `Trajectory` layouts, so
`telapa.rl.ppo.make_learn` serves both. The jax rollout is a ``lax.scan`` over a batched
`AutoReset` env (jit it); the gymnasium rollout is a host loop over a `GymVectorEnv`
with a jitted ``act``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from telapa.envs.base import AutoReset, Obs
from telapa.envs.host import HostVectorEnv
from telapa.rl.networks import Params
from telapa.rl.policy import Action, Policy
from telapa.rl.ppo import Trajectory

ActFn = Callable[[Params, Obs, jax.Array], tuple[Action, jax.Array]]


def _bonus(info: dict[str, Any], reward: Any) -> Any:
    """The training bonus a step's reward includes (``info["intrinsic_reward"]``, set by
    `telapa.envs.intrinsic`'s wrappers), as float32 of ``reward``'s shape; zeros without
    one, so every rollout's `Trajectory` has the same structure."""
    xp = np if isinstance(reward, np.ndarray) else jax.numpy
    bonus = info.get("intrinsic_reward")
    return xp.zeros(xp.shape(reward), xp.float32) if bonus is None else xp.asarray(
        bonus, xp.float32)


def make_act(policy: Policy, deterministic: bool = False) -> ActFn:
    """``act(params, obs, key) -> (Action, next_key)`` for a batch of observations."""

    def act(params: Params, obs: Obs, key: jax.Array) -> tuple[Action, jax.Array]:
        key, act_key = jax.random.split(key)
        return policy.act(params, obs, act_key, deterministic), key

    return act


def make_jax_rollout(
    env: AutoReset, policy: Policy, n_steps: int, *, batch_axes: tuple[str, ...] = ()
) -> Callable[[Params, Any, Obs, jax.Array], tuple[Any, Obs, jax.Array, Trajectory]]:
    """``rollout(params, env_state, obs, key) -> (env_state, obs, key, traj)``; pure.
    ``batch_axes``: the names of the ``vmap`` axes the rollout runs under (see
    `AutoReset.step`)."""
    act = make_act(policy)

    def rollout(params: Params, env_state: Any, obs: Obs, key: jax.Array):
        def step(carry, _):
            env_state, obs, key = carry
            a, key = act(params, obs, key)
            env_state, next_obs, reward, terminated, truncated, info = env.step(
                env_state, a.env_action, batch_axes=batch_axes
            )
            transition = Trajectory(
                obs, a.action, a.log_prob, a.value, reward, terminated, truncated,
                info["final_obs"], _bonus(info, reward),
            )
            return (env_state, next_obs, key), transition

        (env_state, obs, key), traj = jax.lax.scan(
            step, (env_state, obs, key), None, length=n_steps
        )
        return env_state, obs, key, traj

    return rollout


def gym_rollout(
    env: HostVectorEnv, act: ActFn, params: Params, obs: Obs, key: jax.Array, n_steps: int
) -> tuple[Obs, jax.Array, Trajectory]:
    """Steps ``env`` on the host for ``n_steps``; returns ``(obs, key, traj)``.

    The trajectory is stacked with numpy (host arrays; the jitted update takes them in
    one transfer)."""
    steps: list[tuple] = []
    for _ in range(n_steps):
        a, key = act(params, obs, key)
        a = jax.device_get(a)
        _, next_obs, reward, terminated, truncated, info = env.step(None, a.env_action)
        steps.append((obs, a.action, a.log_prob, a.value, reward, terminated, truncated,
                      info["final_obs"], _bonus(info, reward)))
        obs = next_obs
    columns = [jax.tree.map(lambda *xs: np.stack(xs), *col) for col in zip(*steps, strict=True)]
    return obs, key, Trajectory(*columns)
