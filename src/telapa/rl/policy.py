"""Action distributions and the `Policy`: a network plus how to act with it.

Discrete actions: a categorical over logits. Continuous actions: a diagonal Gaussian
with a state-independent log-std; sampled actions are clipped to the action bounds only
when sent to the env (the stored action and its log-prob are the unclipped sample, as in
CleanRL / SB3).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from telapa.config import NetworkConfig
from telapa.envs.base import EnvSpec, Obs
from telapa.rl.networks import ActorCritic, Params, dummy_obs, make_network

_LOG_2PI_E = float(np.float32(math.log(2.0 * math.pi * math.e)))
"""log(2 pi e), rounded to float32 as the Gaussian entropy has always used it; numpy, so
that importing telapa does not start JAX's backend (XLA_FLAGS set after the import
still apply)."""


@struct.dataclass
class Categorical:
    logits: jax.Array

    def sample(self, key: jax.Array) -> jax.Array:
        return jax.random.categorical(key, self.logits)

    def mode(self) -> jax.Array:
        return jnp.argmax(self.logits, axis=-1)

    def log_prob(self, action: jax.Array) -> jax.Array:
        logp = jax.nn.log_softmax(self.logits)
        return jnp.take_along_axis(logp, action[..., None].astype(jnp.int32), axis=-1)[..., 0]

    def entropy(self) -> jax.Array:
        logp = jax.nn.log_softmax(self.logits)
        return -jnp.sum(jnp.exp(logp) * logp, axis=-1)


@struct.dataclass
class DiagGaussian:
    mean: jax.Array
    log_std: jax.Array

    def sample(self, key: jax.Array) -> jax.Array:
        noise = jax.random.normal(key, self.mean.shape)
        return self.mean + jnp.exp(self.log_std) * noise

    def mode(self) -> jax.Array:
        return self.mean

    def log_prob(self, action: jax.Array) -> jax.Array:
        z = (action - self.mean) * jnp.exp(-self.log_std)
        return jnp.sum(-0.5 * z**2 - self.log_std - 0.5 * jnp.log(2.0 * jnp.pi), axis=-1)

    def entropy(self) -> jax.Array:
        ent = self.log_std + 0.5 * _LOG_2PI_E
        return jnp.sum(jnp.broadcast_to(ent, self.mean.shape), axis=-1)


Distribution = Categorical | DiagGaussian


class Action(NamedTuple):
    action: jax.Array
    """The sampled action (what the PPO loss evaluates)."""
    env_action: jax.Array
    """What the env receives: the action, clipped to the bounds when continuous."""
    log_prob: jax.Array
    value: jax.Array


@dataclass(frozen=True)
class Policy:
    """Pure functions of ``params`` around an `ActorCritic` for one `EnvSpec`."""

    spec: EnvSpec
    network: ActorCritic

    @classmethod
    def create(cls, spec: EnvSpec, config: NetworkConfig) -> Policy:
        return cls(spec, make_network(spec, config))

    def init(self, key: jax.Array) -> Params:
        """Fresh random parameters (jitted: eager Flax init compiles every op apart)."""
        return self._init(key)

    @cached_property
    def _init(self) -> Callable[[jax.Array], Params]:
        obs = dummy_obs(self.spec.observation)
        return jax.jit(lambda key: self.network.init(key, obs))

    def __call__(self, params: Params, obs: Obs) -> tuple[Distribution, jax.Array]:
        """``(pi(.|s), V(s))``."""
        out, value = self.network.apply(params, obs)
        if self.spec.discrete:
            return Categorical(out), value
        return DiagGaussian(out, params["params"]["log_std"]), value

    def value(self, params: Params, obs: Obs) -> jax.Array:
        return self.network.apply(params, obs)[1]

    def act(
        self, params: Params, obs: Obs, key: jax.Array, deterministic: bool = False
    ) -> Action:
        """Samples (or, if ``deterministic``, takes the mode of) an action."""
        dist, value = self(params, obs)
        action = dist.mode() if deterministic else dist.sample(key)
        env_action = action
        if not self.spec.discrete:
            env_action = jnp.clip(action, self.spec.action_low, self.spec.action_high)
        return Action(action, env_action, dist.log_prob(action), value)
