"""The diagonal Fisher information of a policy on an agent's env (EWC's weights).

``F_i = E_{s ~ pi, a ~ pi(.|s)}[(d log pi(a|s) / d theta_i)^2]`` (Kirkpatrick et al. 2017,
eq. 3), estimated from states the policy visits; `telapa.continual.methods.EWC` takes it
at every task end.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from telapa.rl.agent import Agent
from telapa.rl.networks import Params


def diagonal_fisher(
    agent: Agent, params: Params, steps: int, key: jax.Array, chunk: int = 256
) -> Params:
    """``F_i = E_{s ~ pi, a ~ pi(.|s)}[(d log pi(a|s) / d theta_i)^2]`` over ``steps`` states
    visited by ``params`` on the agent's env (Kirkpatrick et al. 2017, eq. 3); per-sample
    gradients are taken ``chunk`` states at a time. On jax one compiled program (the
    sampling rollout and a ``lax.scan`` over the chunks, `fisher_program`); on gymnasium
    the states are sampled on the host and the gradients taken by the same scan."""
    if agent.backend == "jax":
        fisher = agent.program(("fisher", steps, chunk, False),
                               lambda: jax.jit(fisher_program(agent, steps, chunk)))
        return fisher(params, key)
    obs_key, action_key = jax.random.split(key)
    obs = agent.sample_observations(params, steps, obs_key)
    of_observations = agent.program(
        ("fisher-of-observations", steps, chunk),
        lambda: jax.jit(partial(_fisher_of_observations, agent.policy, chunk=chunk)))
    return of_observations(params, obs, action_key)


def fisher_program(agent: Agent, steps: int, chunk: int = 256,
                   batch_axes: tuple[str, ...] = ()) -> Callable[[Params, jax.Array], Params]:
    """The pure ``fisher(params, key)`` of `diagonal_fisher` on the jax backend:
    ``obs_key, action_key = split(key)``, the states of `Agent.observation_sampler`
    with ``obs_key``, state j's action drawn with ``split(action_key, steps)[j]``;
    ``batch_axes``: the ``vmap`` axes it runs under."""
    sample = agent.observation_sampler(steps, batch_axes)

    def fisher(params: Params, key: jax.Array) -> Params:
        obs_key, action_key = jax.random.split(key)
        return _fisher_of_observations(agent.policy, params, sample(params, obs_key),
                                       action_key, chunk=chunk)

    return fisher


def _fisher_of_observations(policy, params: Params, obs, action_key: jax.Array, *,
                            chunk: int) -> Params:
    """The mean squared per-sample score over the states ``obs`` (leading axis N), the
    sum taken ``chunk`` states at a time in order by a ``lax.scan`` (a last partial chunk
    is filled with repeated states whose gradients are zeroed)."""
    steps = len(jax.tree.leaves(obs)[0])
    keys = jax.random.split(action_key, steps)
    chunks = -(-steps // chunk)
    if chunks * chunk > steps:  # repeat states to whole chunks, weight 0
        rows = np.arange(chunks * chunk) % steps
        obs, keys = jax.tree.map(lambda x: x[rows], (obs, keys))
    valid = jnp.asarray(np.arange(chunks * chunk) < steps)

    def log_prob(p: Params, single_obs, k: jax.Array) -> jax.Array:
        dist, _ = policy(p, jax.tree.map(lambda x: x[None], single_obs))
        return dist.log_prob(jax.lax.stop_gradient(dist.sample(k)))[0]

    def add_chunk(total: Params, i: jax.Array) -> tuple[Params, None]:
        part = jax.tree.map(lambda x: jax.lax.dynamic_slice_in_dim(x, i * chunk, chunk),
                            (obs, keys, valid))
        batch, batch_keys, ok = part
        grads = jax.vmap(jax.grad(log_prob), in_axes=(None, 0, 0))(params, batch, batch_keys)
        if chunks * chunk > steps:
            grads = jax.tree.map(
                lambda g: jnp.where(ok.reshape((-1,) + (1,) * (g.ndim - 1)), g, 0.0), grads)
        sums = jax.tree.map(lambda g: jnp.sum(g**2, axis=0), grads)
        return jax.tree.map(jnp.add, total, sums), None

    total, _ = jax.lax.scan(add_chunk, jax.tree.map(jnp.zeros_like, params),
                            jnp.arange(chunks))
    return jax.tree.map(lambda s: s / steps, total)


__all__ = ["diagonal_fisher", "fisher_program"]
