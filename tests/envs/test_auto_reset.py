"""`AutoReset`: batched envs that start a fresh, independent level when an episode ends."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from telapa.envs import AutoReset, make
from telapa.envs.minigrid import State
from telapa.envs.minigrid.constants import Action

ENV = make("MiniGrid-DoorKey-8x8-v0")


def _about_to_truncate(state, which: np.ndarray):
    """Puts the envs in ``which`` one step before truncation."""
    env_state: State = state.env_state
    step_count = jnp.where(which, env_state.max_steps - 1, env_state.step_count)
    return state.replace(env_state=env_state.replace(step_count=step_count))


def _step(env: AutoReset, state, n: int):
    return jax.jit(env.step)(state, jnp.full((n,), Action.LEFT, jnp.int32))


@pytest.mark.parametrize("pool_size", [1, 2, 4])
def test_finished_envs_restart_and_the_others_continue(pool_size: int) -> None:
    n = 4
    env = AutoReset(ENV, n, pool_sizes=(pool_size,))
    state, _ = env.reset(jax.random.key(0))
    ending = np.array([False, True, False, True])
    before = _about_to_truncate(state, ending)
    after, obs, reward, terminated, truncated, info = _step(env, before, n)

    np.testing.assert_array_equal(truncated, ending)
    assert not np.asarray(terminated).any() and not np.asarray(reward).any()
    np.testing.assert_array_equal(after.env_state.step_count, [1, 0, 1, 0])
    continued = ~ending
    # Continuing envs keep their level; restarted ones get a fresh level each.
    np.testing.assert_array_equal(
        after.env_state.grid[continued], before.env_state.grid[continued]
    )
    grids = np.asarray(after.env_state.grid[ending]).reshape(2, -1)
    starts = np.asarray(after.env_state.agent_pos[ending])
    assert (grids[0] != grids[1]).any() or (starts[0] != starts[1]).any()
    # The returned observation starts the new episode; the final one is kept in info.
    first_obs = jax.vmap(ENV.observe)(after.env_state)
    np.testing.assert_array_equal(obs["image"], first_obs["image"])
    stepped = jax.vmap(ENV.step)(before.env_state, jnp.full((n,), Action.LEFT, jnp.int32))
    np.testing.assert_array_equal(info["final_obs"]["image"], stepped[1]["image"])
    np.testing.assert_array_equal(info["features"], stepped[5]["features"])


def test_no_episode_ends_means_plain_steps() -> None:
    n = 3
    env = AutoReset(ENV, n)
    state, _ = env.reset(jax.random.key(1))
    after, obs, *_ = _step(env, state, n)
    expected_state, expected_obs, *_ = jax.vmap(ENV.step)(
        state.env_state, jnp.full((n,), Action.LEFT, jnp.int32)
    )
    np.testing.assert_array_equal(after.env_state.grid, expected_state.grid)
    np.testing.assert_array_equal(after.env_state.agent_dir, expected_state.agent_dir)
    np.testing.assert_array_equal(obs["image"], expected_obs["image"])


def test_rejects_an_empty_batch() -> None:
    with pytest.raises(ValueError, match="num_envs"):
        AutoReset(ENV, 0)
