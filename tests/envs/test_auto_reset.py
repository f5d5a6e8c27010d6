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


def _levels(env_state: State, which: np.ndarray) -> np.ndarray:
    """One row per env in ``which``: its grid, agent position and direction."""
    return np.concatenate(
        [
            np.asarray(env_state.grid[which]).reshape(int(which.sum()), -1),
            np.asarray(env_state.agent_pos[which]),
            np.asarray(env_state.agent_dir[which])[:, None],
        ],
        axis=1,
    )


def _step(env: AutoReset, state, n: int):
    return jax.jit(env.step)(state, jnp.full((n,), Action.LEFT, jnp.int32))


@pytest.mark.parametrize("chunks", [(1,), (2,), (4,), (2, 1)])
def test_finished_envs_restart_and_the_others_continue(chunks: tuple[int, ...]) -> None:
    n = 5
    env = AutoReset(ENV, n, chunks=chunks)
    state, _ = env.reset(jax.random.key(0))
    ending = np.array([False, True, False, True, True])
    before = _about_to_truncate(state, ending)
    after, obs, reward, terminated, truncated, info = _step(env, before, n)

    np.testing.assert_array_equal(truncated, ending)
    assert not np.asarray(terminated).any() and not np.asarray(reward).any()
    np.testing.assert_array_equal(after.env_state.step_count, [1, 0, 1, 0, 0])
    continued = ~ending
    # Continuing envs keep their level; restarted ones get a fresh level each.
    np.testing.assert_array_equal(
        after.env_state.grid[continued], before.env_state.grid[continued]
    )
    fresh, old = _levels(after.env_state, ending), _levels(before.env_state, ending)
    assert len({level.tobytes() for level in fresh}) == 3
    assert all((new != previous).any() for new, previous in zip(fresh, old, strict=True))
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


def test_rejects_an_empty_batch_and_empty_chunks() -> None:
    with pytest.raises(ValueError, match="num_envs"):
        AutoReset(ENV, 0)
    with pytest.raises(ValueError, match="chunks"):
        AutoReset(ENV, 4, chunks=(2, 0))
