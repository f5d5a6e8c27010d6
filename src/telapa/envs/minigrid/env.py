"""`MiniGrid`: a ported Farama MiniGrid task as a functional `JaxEnv`."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from telapa.envs.base import EnvSpec, Obs
from telapa.envs.minigrid.constants import N_ACTIONS
from telapa.envs.minigrid.dynamics import step_dynamics
from telapa.envs.minigrid.features import FEATURE_DIM, feature_vector, step_flags
from telapa.envs.minigrid.observation import observation_specs, observe
from telapa.envs.minigrid.state import State
from telapa.envs.minigrid.task import Task


def success_reward(step_count: jax.Array, max_steps: jax.Array) -> jax.Array:
    """``MiniGridEnv._reward``, ``1 - 0.9 * step_count / max_steps``, as float32.

    Computed as the exact ratio ``(10 max_steps - 9 step_count) / (10 max_steps)`` of two
    integers, whose correctly rounded float32 equals float32 of Farama's float64 value.
    That holds while XLA divides exactly, as on CPU for per-env operands (a `State`
    batch); a ``max_steps`` broadcast over a batch lets XLA multiply by its reciprocal
    instead, which can be 1 ulp off.
    """
    numerator = (10 * max_steps - 9 * step_count).astype(jnp.float32)
    return jax.lax.div(numerator, (10 * max_steps).astype(jnp.float32))


class MiniGrid:
    """A Farama MiniGrid task (see `Task`) as a pure, jittable, vmappable env.

    ``step`` follows ``MiniGridEnv.step`` and the task's rules, never resets, and returns
    ``info = {"features": float32 (11,), "success": bool}`` (see `features`).
    """

    def __init__(self, task: Task, observe_mission: bool = True):
        self.task = task
        self.observe_mission = observe_mission
        self.spec = EnvSpec(
            env_id=task.env_id,
            observation=observation_specs(observe_mission),
            n_actions=N_ACTIONS,
            max_steps=task.max_steps,
            feature_dim=FEATURE_DIM,
        )

    def reset(self, key: jax.Array) -> tuple[State, Obs]:
        state = self.task.generate(key)
        return state, self.observe(state)

    def observe(self, state: State) -> Obs:
        return observe(state, self.task.see_through_walls, self.observe_mission)

    def step(
        self, state: State, action: jax.Array
    ) -> tuple[State, Obs, jax.Array, jax.Array, jax.Array, dict[str, jax.Array]]:
        action = jnp.asarray(action, jnp.int32)
        next_state, transition = step_dynamics(state, action)
        task_success, task_failure = self.task.rules(state, action, next_state, transition)
        success = transition.reached_goal | task_success
        terminated = success | transition.entered_lava | task_failure
        truncated = next_state.step_count >= next_state.max_steps
        reward = jnp.where(success, success_reward(next_state.step_count, next_state.max_steps), 0)
        events = step_flags(
            jnp,
            action,
            transition.front_before,
            transition.front_after,
            next_state.carrying,
            success,
        )
        next_state = next_state.replace(flags=next_state.flags | events)
        features = feature_vector(
            jnp,
            next_state.agent_pos,
            next_state.agent_dir,
            next_state.step_count,
            next_state.max_steps,
            action,
            next_state.flags,
            self.task.width,
            self.task.height,
        )
        info = {"features": features, "success": success}
        return next_state, self.observe(next_state), reward, terminated, truncated, info
