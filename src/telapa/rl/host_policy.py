"""Host rollouts of a Gaussian policy with its mean in numpy: one numpy forward per env
step instead of one jitted call, for the host backends (``native``, ``gymnasium``),
whose rollouts step envs on the host anyway.

At PPO's 8 envs a jitted call per step costs more than the physics it waits for (a
dispatch and two transfers, ~0.35 ms on 2 CPU cores, against 0.2 ms for 8 HalfCheetah
steps); a 64x64 MLP in numpy on 8 rows takes a few microseconds. What the rollout
computes is otherwise the jitted ``act``'s (`telapa.rl.rollout.make_act`):

    key, k_t = split(key);   eps_t = normal(k_t, (N, A))        (all T steps, one call)
    a_t = mu(s_t) + exp(log_std) * eps_t                        (numpy, per step)
    env receives clip(a_t, low, high)
    log pi(a_t | s_t), V(s_t)                                   (one jitted call, after)

so the noise is the jitted path's bit for bit, and the stored log-probabilities and
values are the policy's own (JAX) on the stored states and actions; only the mean that
the sampled action is built on is numpy's, a few float32 ulps from XLA's.

Evaluation on the native backend acts the same way (`HostActions`: the noise of every
step drawn up front, the mean in numpy).

`host_mean` gives the numpy mean for the networks it covers: continuous actions, the
``flat`` encoder over real-valued observation entries (the MuJoCo family), any
activation; other networks (MiniGrid's codes, the CNN) keep the jitted ``act``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from telapa.envs.host import HostVectorEnv
from telapa.rl.networks import Params
from telapa.rl.policy import Policy
from telapa.rl.ppo import Trajectory
from telapa.rl.rollout import _bonus

MeanFn = Callable[[Any, dict[str, np.ndarray]], np.ndarray]

_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "tanh": np.tanh,
    "relu": lambda z: np.maximum(z, np.float32(0)),
    "dff": lambda z: np.concatenate([np.sin(z), np.cos(z)], axis=-1),
}


def host_mean(policy: Policy) -> MeanFn | None:
    """``mean(params, obs)``: the actor's Gaussian mean mu(s) for a batch of observations,
    in float32 numpy (``params`` as numpy arrays, `jax.device_get`); None when the
    network is not one it covers (module docstring). Leading axes pass through: with S
    stacked parameter sets (leading axis S on every leaf) and observations of shape
    (S, N, ...), set i's mean is taken on its own N rows (``x @ W + b`` with a batched
    matmul)."""
    net = policy.network
    if policy.spec.discrete or net.encoder != "flat" or net.activation not in _ACTIVATIONS:
        return None
    if any(levels is not None for _, _, levels in net.obs_spec):
        return None
    entries = [(name, len(shape)) for name, shape, _ in net.obs_spec]
    depth, act = len(net.hidden), _ACTIVATIONS[net.activation]

    def dense(x: np.ndarray, layer: dict[str, np.ndarray]) -> np.ndarray:
        return x @ layer["kernel"] + layer["bias"][..., None, :]

    def mean(params: Any, obs: dict[str, np.ndarray]) -> np.ndarray:
        p = params["params"]
        parts = [np.asarray(obs[k], np.float32) for k, _ in entries]
        x = np.concatenate([v.reshape(*v.shape[:v.ndim - dims], -1)
                            for v, (_, dims) in zip(parts, entries, strict=True)], axis=-1)
        for i in range(depth):
            x = act(dense(x, p["actor"][f"Dense_{i}"]))
        return dense(x, p["Dense_0"])

    return mean


class HostActions:
    """Evaluation's actions in numpy for S parameter sets x E episodes, step by step:

        a_t = clip(mu(s_t) + exp(log_std) * eps_t, low, high)      (eps_t = 0: deterministic)

    with eps_t the jitted ``act``'s draws bit for bit (`make_noise` of each set's key: the
    key scheme of ``key, k_t = split(key)`` per step), drawn for all T steps up front in
    one call; mu in numpy (`host_mean`). ``actions(obs, t)`` takes the (S, E, ...)
    observations of step t and gives the (S, E, A) env actions."""

    def __init__(self, mean: MeanFn, policy: Policy, params: Params, eps: np.ndarray | None):
        self.mean, self.params, self.eps = mean, jax.device_get(params), eps
        self.std = np.exp(self.params["params"]["log_std"])[..., None, :]  # (S, 1, A)
        self.low, self.high = policy.spec.action_low, policy.spec.action_high

    def __call__(self, obs: dict[str, np.ndarray], t: int) -> np.ndarray:
        mean = self.mean(self.params, obs)
        if self.eps is not None:
            mean = mean + self.std * self.eps[:, t]
        return np.clip(mean, self.low, self.high)


def make_eval_noise(steps: int, shape: tuple[int, ...]) -> Callable:
    """``noise(keys) -> eps``: for each of S keys, `make_noise`'s T = ``steps`` draws of
    ``shape``; eps has shape (S, T, *shape)."""
    one = make_noise(steps, shape)
    return jax.vmap(lambda key: one(key)[1])


def make_noise(n_steps: int, shape: tuple[int, ...]) -> Callable:
    """``noise(key) -> (key, eps)``: the T = ``n_steps`` draws eps_t = normal(k_t,
    ``shape``) of ``key, k_t = split(key)`` in turn, as the jitted ``act`` draws them."""

    def noise(key: jax.Array) -> tuple[jax.Array, jax.Array]:
        def step(key, _):
            key, act_key = jax.random.split(key)
            return key, jax.random.normal(act_key, shape)

        return jax.lax.scan(step, key, None, length=n_steps)

    return noise


def make_score(policy: Policy) -> Callable:
    """``score(params, obs, action) -> (log_prob, value)`` over any leading axes."""

    def score(params: Params, obs: Any, action: jax.Array) -> tuple[jax.Array, jax.Array]:
        dist, value = policy(params, obs)
        return dist.log_prob(action), value

    return score


def host_rollout(env: HostVectorEnv, mean: MeanFn, noise: Callable, score: Callable,
                 policy: Policy, params: Params, obs: dict[str, np.ndarray],
                 key: jax.Array, n_steps: int) -> tuple[dict, jax.Array, Trajectory]:
    """`telapa.rl.rollout.gym_rollout` with the mean in numpy (module docstring):
    ``(obs, key, traj)`` after ``n_steps`` steps of ``env``; ``noise`` and ``score``
    are the jitted `make_noise` (for ``n_steps``) and `make_score`."""
    host = jax.device_get(params)
    std = np.exp(host["params"]["log_std"])
    low, high = policy.spec.action_low, policy.spec.action_high
    key, eps = noise(key)
    eps = np.asarray(eps)
    steps: list[tuple] = []
    for t in range(n_steps):
        action = mean(host, obs) + std * eps[t]
        _, next_obs, reward, terminated, truncated, info = env.step(
            None, np.clip(action, low, high))
        steps.append((obs, action, reward, terminated, truncated, info["final_obs"],
                      _bonus(info, reward)))
        obs = next_obs
    columns = [jax.tree.map(lambda *xs: np.stack(xs), *col) for col in zip(*steps, strict=True)]
    states, actions, reward, terminated, truncated, final_obs, bonus = columns
    log_prob, value = score(params, states, actions)
    return obs, key, Trajectory(states, actions, log_prob, value, reward, terminated,
                                truncated, final_obs, bonus)


__all__ = ["HostActions", "host_mean", "host_rollout", "make_eval_noise", "make_noise",
           "make_score"]
