"""LineWalk as a functional `telapa.envs.base.JaxEnv`: the same walk as the gymnasium env
(`telapa_linewalk.LineWalk`), written as pure functions of an immutable state, so that
telapa compiles the env together with the policy (``jit``, ``vmap``, ``lax.scan``) on the
``jax`` backend.

Three rules make a port (the house models are MiniGrid's, `telapa.envs.minigrid.env`):

* the state is a pytree of arrays (a ``flax.struct`` dataclass), never mutated;
* ``reset(key)`` and ``step(state, action)`` are pure: no Python ``if`` on array values
  (``jnp.where`` instead), no host calls; ``step`` never resets (`telapa.envs.base.
  AutoReset` starts new episodes);
* ``info["features"]`` holds the step's behaviour sketch, D = ``spec.feature_dim`` floats.

The task options (``length``, ``limit``) are Python ints fixed when the env is made: they
are constants of the compiled program, as a MiniGrid task's grid size is.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from telapa.envs.base import ArraySpec, EnvSpec, Obs
from telapa_linewalk import GOAL_REWARD, ID, TIMEOUT_REWARD, check_size

FEATURE_DIM = 1
"""D: the sketch is the walker's position alone."""


def sketch(position: Any, limit: int) -> Any:
    """The behaviour feature of a step, shape (1,): the walker's position in units of the
    time limit, ``float32(position) * (float32(1) / float32(limit))`` (numpy or JAX).

    Written that way, the feature is exactly what ``FeatureCodec((limit,))`` stores as the
    integer ``position`` and decodes bit for bit (`telapa.qd.trajectories.FeatureCodec`);
    0 <= position <= length <= limit keeps it in [0, 1]."""
    xp = jnp if isinstance(position, jax.Array) else np
    return xp.asarray(position, xp.float32)[None] * (np.float32(1) / np.float32(limit))


@struct.dataclass
class State:
    """One episode: the walker's cell and the steps taken (int32 scalars)."""

    position: jax.Array
    steps: jax.Array


class JaxLineWalk:
    """LineWalk of ``length`` cells and ``limit`` steps as a pure, jittable, vmappable env.

    Observation ``{"obs": [position / length, steps left / limit]}`` (float32, the
    gymnasium env's, as the generic family names it); actions 0 (left) and 1 (right);
    ``info = {"features": sketch(position, limit)}``.
    """

    def __init__(self, length: int = 3, limit: int = 8):
        check_size(length, limit)
        self.length, self.limit = int(length), int(limit)
        self._scale = np.float32(1) / np.array([self.length, self.limit], np.float32)
        """1/length and 1/limit in float32, as the gymnasium env scales its counts."""
        self.spec = EnvSpec(env_id=ID, observation={"obs": ArraySpec((2,), jnp.float32)},
                            n_actions=2, max_steps=self.limit, feature_dim=FEATURE_DIM)

    def reset(self, key: jax.Array) -> tuple[State, Obs]:
        """Every episode starts at cell 0 (``key`` is unused: the walk is deterministic)."""
        state = State(position=jnp.int32(0), steps=jnp.int32(0))
        return state, self.observe(state)

    def observe(self, state: State) -> Obs:
        counts = jnp.stack([state.position, self.limit - state.steps]).astype(jnp.float32)
        return {"obs": counts * self._scale}

    def step(self, state: State, action: jax.Array
             ) -> tuple[State, Obs, jax.Array, jax.Array, jax.Array, dict[str, jax.Array]]:
        move = jnp.where(jnp.asarray(action) == 1, 1, -1)
        state = State(position=jnp.maximum(0, state.position + move), steps=state.steps + 1)
        reached = state.position >= self.length
        timeout = ~reached & (state.steps >= self.limit)
        reward = jnp.where(reached, GOAL_REWARD, jnp.where(timeout, TIMEOUT_REWARD, 0.0))
        info = {"features": sketch(state.position, self.limit)}
        return state, self.observe(state), reward.astype(jnp.float32), reached, timeout, info


__all__ = ["FEATURE_DIM", "JaxLineWalk", "State", "sketch"]
