"""Policy evaluation: success rate, returns, lengths and per-step behaviour features.

SR is the env family's competence of the episode returns (`telapa.envs.family`): the
fraction of episodes with positive return for MiniGrid (paper eq. for SR; a positive
return means the goal was reached), clip(E[R] / R*, 0, 1) for MuJoCo. Per-step features
(``info["features"]``, D per step) are returned zero-padded to ``max_steps`` with the
episode lengths, the layout the latent embedder consumes.

On the jax backend `make_jax_evaluator` gives a pure ``evaluate(params, key)`` and
`make_population_evaluator` the same for a batch of parameter sets (illumination's
candidates); on the gymnasium backend `evaluate_gym` runs a host loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from telapa.envs.base import JaxEnv
from telapa.envs.family import Competence, SuccessRate
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
    competence: Competence = SuccessRate()
    """The env family's competence score of the returns (`Agent.evaluate` sets it)."""

    @property
    def sr(self) -> float:
        """Competence: MiniGrid's success rate, MuJoCo's normalized return SR~."""
        return float(self.competence(np.asarray(self.returns)))

    @property
    def mean_return(self) -> float:
        return float(np.mean(self.returns))

    @property
    def mean_length(self) -> float:
        return float(np.mean(self.lengths))


def make_population_evaluator(
    env: JaxEnv,
    policy: Policy,
    episodes: int,
    max_steps: int,
    deterministic: bool = False,
    *,
    feature_steps: int | None = None,
) -> Callable[[Params, jax.Array], tuple[jax.Array, jax.Array, jax.Array]]:
    """Pure ``evaluate(params, keys) -> (returns, lengths, features)`` of B parameter sets
    (``params`` leaves and ``keys`` with a leading axis B), ``episodes`` parallel episodes
    each, stopped at their end or after ``max_steps`` steps. Shapes (B, E), (B, E) and
    (B, E, feature_steps, D) (default ``feature_steps = max_steps``: the first steps of
    each episode, zero past its length).

    Candidate b is evaluated exactly as `make_jax_evaluator` evaluates it with
    ``keys[b]``. All B x E episodes advance in one loop whose condition is a scalar (any
    episode still running), so finished candidates cost masked lanes, not a copy of the
    carry per step as a ``vmap`` of a per-candidate ``while_loop`` would."""
    keep = max_steps if feature_steps is None else int(feature_steps)
    reset = jax.vmap(jax.vmap(env.reset))
    step = jax.vmap(jax.vmap(env.step))
    act = jax.vmap(lambda p, o, k: policy.act(p, o, k, deterministic).env_action)
    split = jax.vmap(jax.random.split)
    dim = env.spec.feature_dim

    def evaluate(params: Params, keys: jax.Array):
        b = keys.shape[0]
        pair = split(keys)
        reset_keys, keys = pair[:, 0], pair[:, 1]
        state, obs = reset(jax.vmap(lambda k: jax.random.split(k, episodes))(reset_keys))
        zeros = jnp.zeros((b, episodes))
        init = (
            0, state, obs, keys, zeros.astype(bool), zeros, zeros.astype(jnp.int32),
            jnp.zeros((b, episodes, keep, dim), jnp.float32),
        )

        def running(carry):
            t, *_, done, _, _, _ = carry
            return (t < max_steps) & ~done.all()

        def body(carry):
            t, state, obs, keys, done, ret, length, feats = carry
            pair = split(keys)
            keys, act_keys = pair[:, 0], pair[:, 1]
            action = act(params, obs, act_keys)
            state, obs, reward, terminated, truncated, info = step(state, action)
            active = ~done
            ret = ret + jnp.where(active, reward, 0.0)
            length = length + active
            f = jnp.where(active[..., None], info["features"].astype(jnp.float32), 0.0)
            slot = jnp.minimum(t, keep - 1)
            old = jax.lax.dynamic_index_in_dim(feats, slot, axis=2, keepdims=False)
            f = jnp.where(t < keep, f, old)
            feats = jax.lax.dynamic_update_index_in_dim(feats, f, slot, axis=2)
            done = done | terminated | truncated
            return t + 1, state, obs, keys, done, ret, length, feats

        *_, ret, length, feats = jax.lax.while_loop(running, body, init)
        return ret, length, feats

    return evaluate


def make_jax_evaluator(
    env: JaxEnv, policy: Policy, episodes: int, max_steps: int, deterministic: bool = False
) -> Callable[[Params, jax.Array], tuple[jax.Array, jax.Array, jax.Array]]:
    """Pure ``evaluate(params, key) -> (returns, lengths, features)`` of ``episodes``
    parallel episodes, each stopped at its end or after ``max_steps`` steps: the
    population evaluator with B = 1. Keys: ``reset_key, key = split(key)``, episode
    levels from ``split(reset_key, episodes)``, then ``key, act_key = split(key)`` per
    step (one ``act_key`` samples every episode's action)."""
    population = make_population_evaluator(env, policy, episodes, max_steps, deterministic)

    def evaluate(params: Params, key: jax.Array):
        one = jax.tree.map(lambda x: x[None], params)
        ret, length, feats = population(one, key[None])
        return ret[0], length[0], feats[0]

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
