"""Differential-test harness: Farama MiniGrid episodes replayed on the JAX port.

`record` plays seeded episodes of a Farama env (wrapped by `wrap_farama`) with biased
random actions until they end; `replay` runs the same actions from `from_farama`'s
start states through the port, all episodes at once (one jitted ``vmap`` of a ``scan``);
`mismatches` lists every step where the two disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import minigrid  # noqa: F401  (registers the Farama ids)
import numpy as np

from telapa.envs import make
from telapa.envs.minigrid import State, from_farama
from telapa.envs.minigrid.constants import Action
from telapa.envs.minigrid.farama import encode_obj
from telapa.envs.minigrid.gym_wrappers import wrap_farama

ACTION_PROBS = np.array([0.15, 0.15, 0.30, 0.13, 0.12, 0.13, 0.02])
"""left, right, forward, pickup, drop, toggle, done: 40% interactions."""

STEP_FIELDS = (
    "image",
    "direction",
    "mission",
    "reward",
    "terminated",
    "truncated",
    "carrying",
    "agent_pos",
    "features",
    "success",
)


@dataclass
class Episode:
    seed: int
    start: State
    first_obs: dict[str, np.ndarray]
    actions: np.ndarray  # (T,)
    steps: dict[str, np.ndarray]  # STEP_FIELDS, each (T, ...)
    final_grid: np.ndarray


def record(env_id: str, seeds: range, **make_kwargs: Any) -> list[Episode]:
    """Plays one Farama episode per seed to its end (actions drawn from the seed too)."""
    env = wrap_farama(gym.make(env_id, **make_kwargs))
    base = env.unwrapped
    episodes = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        obs, _ = env.reset(seed=seed)
        start = from_farama(env)
        actions = []
        columns: dict[str, list] = {name: [] for name in STEP_FIELDS}
        done = False
        while not done:
            action = int(rng.choice(len(ACTION_PROBS), p=ACTION_PROBS))
            step_obs, reward, terminated, truncated, info = env.step(action)
            done = terminated or truncated
            actions.append(action)
            row = {
                **step_obs,
                "reward": np.float32(reward),
                "terminated": terminated,
                "truncated": truncated,
                "carrying": encode_obj(base.carrying),
                "agent_pos": np.asarray(base.agent_pos, np.int32),
                "features": info["features"],
                "success": info["success"],
            }
            for name in STEP_FIELDS:
                columns[name].append(row[name])
        steps = {name: np.stack(column) for name, column in columns.items()}
        episodes.append(
            Episode(seed, start, obs, np.array(actions, np.int32), steps, base.grid.encode())
        )
    return episodes


def replay(env_id: str, episodes: list[Episode]) -> tuple[dict[str, np.ndarray], dict]:
    """The port's first observations and per-step outputs, each ``(episodes, T, ...)``."""
    env = make(env_id)
    horizon = max(len(e.actions) for e in episodes)
    actions = np.full((len(episodes), horizon), Action.DONE, np.int32)
    for i, episode in enumerate(episodes):
        actions[i, : len(episode.actions)] = episode.actions
    starts = jax.tree.map(lambda *xs: jnp.stack(xs), *(e.start for e in episodes))

    def rollout(state: State, episode_actions: jax.Array):
        def step(state, action):
            state, obs, reward, terminated, truncated, info = env.step(state, action)
            out = {
                **obs,
                "reward": reward,
                "terminated": terminated,
                "truncated": truncated,
                "carrying": state.carrying,
                "agent_pos": state.agent_pos,
                **info,
                "grid": state.grid,
            }
            return state, out

        return env.observe(state), jax.lax.scan(step, state, episode_actions)[1]

    first_obs, steps = jax.jit(jax.vmap(rollout))(starts, actions)
    return jax.device_get(first_obs), jax.device_get(steps)


def mismatches(episodes: list[Episode], first_obs: dict, steps: dict) -> list[str]:
    """Human-readable disagreements between the recorded and the replayed episodes."""
    found = []
    for i, episode in enumerate(episodes):
        length = len(episode.actions)
        for name, reference in episode.first_obs.items():
            if not np.array_equal(np.asarray(reference), first_obs[name][i]):
                found.append(f"seed {episode.seed}: initial {name} differs")
        for name in STEP_FIELDS:
            differs = np.asarray(episode.steps[name] != steps[name][i, :length])
            differs = differs.reshape(length, -1).any(axis=1)
            if differs.any():
                t = int(np.argmax(differs))
                found.append(
                    f"seed {episode.seed} step {t} (action {episode.actions[t]}): {name} "
                    f"farama {episode.steps[name][t].tolist()} port {steps[name][i, t].tolist()}"
                )
        if not np.array_equal(episode.final_grid, steps["grid"][i, length - 1]):
            found.append(f"seed {episode.seed}: final grid differs")
    return found
