"""Policy evaluation: success rate, returns, lengths and per-step behaviour features.

SR is the fraction of episodes with positive return (paper eq. for SR; in MiniGrid a
positive return means the goal was reached). Per-step features (``info["features"]``,
D per step) are returned zero-padded to ``max_steps`` with the episode lengths, the
layout the latent embedder consumes.

On the jax backend `make_jax_evaluator` gives a pure ``evaluate(params, key)`` (so
populations can be evaluated with ``jax.vmap`` over params); on the gymnasium backend
`evaluate_gym` runs a host loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from telapa.envs.base import JaxEnv
from telapa.envs.gym_backend import GymVectorEnv
from telapa.rl.networks import Params
from telapa.rl.policy import Policy
from telapa.rl.rollout import ActFn


@dataclass(frozen=True)
class EvalResult:
    returns: np.ndarray
    """(E,) undiscounted episode returns."""
    lengths: np.ndarray
    """(E,) episode lengths in steps."""
    features: np.ndarray
    """(E, T, D) per-step behaviour features, zero past each episode's length."""

    @property
    def sr(self) -> float:
        """Success rate: fraction of episodes with positive return."""
        return float(np.mean(self.returns > 0))

    @property
    def mean_return(self) -> float:
        return float(np.mean(self.returns))

    @property
    def mean_length(self) -> float:
        return float(np.mean(self.lengths))


def make_jax_evaluator(
    env: JaxEnv, policy: Policy, episodes: int, max_steps: int, deterministic: bool = False
) -> Callable[[Params, jax.Array], tuple[jax.Array, jax.Array, jax.Array]]:
    """Pure ``evaluate(params, key) -> (returns, lengths, features)`` of ``episodes``
    parallel episodes, each stopped at its end or after ``max_steps`` steps."""
    reset = jax.vmap(env.reset)
    step = jax.vmap(env.step)
    dim = env.spec.feature_dim

    def evaluate(params: Params, key: jax.Array):
        reset_key, key = jax.random.split(key)
        state, obs = reset(jax.random.split(reset_key, episodes))
        zeros = jnp.zeros(episodes)
        init = (
            0, state, obs, key, zeros.astype(bool), zeros, zeros.astype(jnp.int32),
            jnp.zeros((episodes, max_steps, dim), jnp.float32),
        )

        def running(carry):
            t, *_, done, _, _, _ = carry
            return (t < max_steps) & ~done.all()

        def body(carry):
            t, state, obs, key, done, ret, length, feats = carry
            key, act_key = jax.random.split(key)
            action = policy.act(params, obs, act_key, deterministic).env_action
            state, obs, reward, terminated, truncated, info = step(state, action)
            active = ~done
            ret = ret + jnp.where(active, reward, 0.0)
            length = length + active
            f = jnp.where(active[:, None], info["features"].astype(jnp.float32), 0.0)
            feats = feats.at[:, t].set(f)
            done = done | terminated | truncated
            return t + 1, state, obs, key, done, ret, length, feats

        *_, ret, length, feats = jax.lax.while_loop(running, body, init)
        return ret, length, feats

    return evaluate


def evaluate_gym(
    env: GymVectorEnv,
    act: ActFn,
    params: Params,
    episodes: int,
    key: jax.Array,
    max_steps: int,
) -> EvalResult:
    """Runs ``episodes`` episodes on the host, split evenly over ``env``'s copies.

    Each copy runs a fixed quota of consecutive episodes, so short episodes are not
    over-represented.
    """
    n = env.num_envs
    quota = [episodes // n + (i < episodes % n) for i in range(n)]
    finished: list[list[tuple[float, int, np.ndarray]]] = [[] for _ in range(n)]
    running = [(0.0, []) for _ in range(n)]
    reset_key, key = jax.random.split(key)
    _, obs = env.reset(reset_key)
    while any(len(f) < q for f, q in zip(finished, quota, strict=True)):
        a, key = act(params, obs, key)
        _, obs, reward, terminated, truncated, info = env.step(None, np.asarray(a.env_action))
        done = terminated | truncated
        for i in range(n):
            if len(finished[i]) >= quota[i]:
                continue
            ret, feats = running[i]
            feats.append(info["features"][i])
            ret += float(reward[i])
            if done[i]:
                finished[i].append((ret, len(feats), np.stack(feats)))
                ret, feats = 0.0, []
            running[i] = (ret, feats)
    episodes_ = [e for per_env in finished for e in per_env]
    lengths = np.array([length for _, length, _ in episodes_], np.int32)
    horizon = max(max_steps, int(lengths.max()))
    features = np.zeros((episodes, horizon, env.spec.feature_dim), np.float32)
    for j, (_, length, f) in enumerate(episodes_):
        features[j, :length] = f
    returns = np.array([r for r, _, _ in episodes_], np.float32)
    return EvalResult(returns, lengths, features)
