"""Tiny JAX envs for fast PPO tests (not ports of anything)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from telapa.envs.base import ArraySpec, EnvSpec


@struct.dataclass
class CorridorState:
    pos: jax.Array
    t: jax.Array


class Corridor:
    """Walk right along a corridor of ``length`` cells to the goal at the end.

    Actions 0 left, 1 right, 2 stay. Start in a random cell of the left half. Reward
    ``1 - 0.9 t / max_steps`` on reaching the goal (MiniGrid's formula), else 0;
    truncated after ``max_steps``. Observation: one-hot position; features: (x, t).
    """

    def __init__(self, length: int = 8, max_steps: int = 16):
        self.length, self.max_steps = length, max_steps
        self.spec = EnvSpec(
            env_id="Corridor",
            observation={"obs": ArraySpec((length,), jnp.float32)},
            n_actions=3,
            max_steps=max_steps,
            feature_dim=2,
        )

    def _obs(self, state: CorridorState):
        return {"obs": jax.nn.one_hot(state.pos, self.length)}

    def reset(self, key):
        state = CorridorState(jax.random.randint(key, (), 0, self.length // 2), jnp.int32(0))
        return state, self._obs(state)

    def step(self, state: CorridorState, action):
        move = jnp.array([-1, 1, 0])[action]
        pos = jnp.clip(state.pos + move, 0, self.length - 1)
        t = state.t + 1
        state = CorridorState(pos, t)
        terminated = pos == self.length - 1
        truncated = (t >= self.max_steps) & ~terminated
        reward = jnp.where(terminated, 1.0 - 0.9 * t / self.max_steps, 0.0)
        features = jnp.stack([pos / (self.length - 1), t / self.max_steps]).astype(jnp.float32)
        return state, self._obs(state), reward, terminated, truncated, {"features": features}


@struct.dataclass
class ReachState:
    x: jax.Array
    t: jax.Array


class Reach:
    """Continuous: move a point on [-1, 1] to the origin; reward -|x| per step, no
    termination, truncated after ``max_steps``. Action in [-1, 1] moves by 0.25 a."""

    def __init__(self, max_steps: int = 10):
        self.max_steps = max_steps
        self.spec = EnvSpec(
            env_id="Reach",
            observation={"obs": ArraySpec((1,), jnp.float32)},
            action_dim=1,
            max_steps=max_steps,
            feature_dim=1,
        )

    def reset(self, key):
        state = ReachState(jax.random.uniform(key, (), minval=-1.0, maxval=1.0), jnp.int32(0))
        return state, {"obs": state.x[None]}

    def step(self, state: ReachState, action):
        x = jnp.clip(state.x + 0.25 * action[0], -1.0, 1.0)
        t = state.t + 1
        state = ReachState(x, t)
        obs = {"obs": x[None]}
        return state, obs, -jnp.abs(x), jnp.bool_(False), t >= self.max_steps, {"features": x[None]}


@struct.dataclass
class CountdownState:
    length: jax.Array
    t: jax.Array


class Countdown:
    """Episodes of known lengths, for checking evaluators by hand: ``reset`` draws the
    episode's length uniformly from ``lengths`` and the episode terminates after that
    many steps. Actions 0 and 1; the reward is the action taken. Observation: (t,
    length); features: (length, t) after the step, so a feature row names its episode
    and its step."""

    def __init__(self, lengths: tuple[int, ...] = (1, 2, 3, 40)):
        self.lengths = jnp.asarray(lengths, jnp.int32)
        self.spec = EnvSpec(
            env_id="Countdown",
            observation={"obs": ArraySpec((2,), jnp.float32)},
            n_actions=2,
            max_steps=max(lengths),
            feature_dim=2,
        )

    def _obs(self, state: CountdownState):
        return {"obs": jnp.stack([state.t, state.length]).astype(jnp.float32)}

    def reset(self, key):
        state = CountdownState(jax.random.choice(key, self.lengths), jnp.int32(0))
        return state, self._obs(state)

    def step(self, state: CountdownState, action):
        state = CountdownState(state.length, state.t + 1)
        features = jnp.stack([state.length, state.t]).astype(jnp.float32)
        terminated = state.t >= state.length
        reward = action.astype(jnp.float32)
        return state, self._obs(state), reward, terminated, jnp.bool_(False), {
            "features": features
        }
