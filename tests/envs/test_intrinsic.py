"""The episodic count bonus r_tot = r_ext + beta / sqrt(N_ep(phi(s))) on both backends."""

from __future__ import annotations

import gymnasium as gym
import jax
import jax.numpy as jnp
import minigrid  # noqa: F401  (registers the Farama ids)
import numpy as np
import pytest

from telapa.envs import AutoReset, make
from telapa.envs.intrinsic import (
    EpisodicCountBonus,
    episodic_count_bonus_gym,
    minigrid_hash,
)
from telapa.envs.minigrid import from_farama
from telapa.envs.minigrid.constants import Action
from telapa.envs.minigrid.gym_wrappers import wrap_farama

BETA = 0.005
EMPTY = "MiniGrid-Empty-5x5-v0"
L, R, F = Action.LEFT, Action.RIGHT, Action.FORWARD

# Empty-5x5 starts at (1, 1) facing right; the goal is at (3, 3).
SCRIPT = [L, L, L, L, F, F, F, R, F, F]
VISITS = [1, 1, 1, 2, 1, 1, 2, 1, 1, 1]
"""N_ep of each step's new (x, y, dir): four left turns come back to the start (2nd visit),
the third forward bumps into the wall and stays put (2nd visit), the last reaches the goal."""


def _rollout(env, state, actions):
    step = jax.jit(env.step)
    out = []
    for action in actions:
        state, _, reward, terminated, truncated, info = step(state, jnp.int32(action))
        out.append((state, float(reward), bool(terminated), bool(truncated), info))
    return out


def test_hand_computed_bonus_sequence() -> None:
    inner = make(EMPTY)
    env = EpisodicCountBonus(inner, BETA)
    assert env.spec == inner.spec
    state, obs = env.reset(jax.random.key(0))
    assert state.counts.shape == (5 * 5 * 4,) and state.counts.dtype == jnp.int32
    assert int(state.counts.sum()) == 1 and int(state.counts[(1 * 5 + 1) * 4 + 0]) == 1
    np.testing.assert_array_equal(obs["image"], inner.observe(state.inner)["image"])

    steps = _rollout(env, state, SCRIPT)
    bonus = [float(info["intrinsic_reward"]) for *_, info in steps]
    np.testing.assert_allclose(bonus, [BETA / np.sqrt(n) for n in VISITS], rtol=1e-6)
    # Success and the extrinsic reward are the env's own, only the total reward changes.
    *_, (last, reward, terminated, truncated, info) = steps
    assert terminated and not truncated and bool(info["success"])
    extrinsic = 1 - 0.9 * len(SCRIPT) / inner.spec.max_steps
    np.testing.assert_allclose(float(info["extrinsic_reward"]), extrinsic, rtol=1e-6)
    np.testing.assert_allclose(reward, extrinsic + BETA, rtol=1e-6)
    assert [bool(i["success"]) for *_, i in steps] == [False] * 9 + [True]
    assert int(last.counts.sum()) == 1 + len(SCRIPT)

    plain = _rollout(inner, state.inner, SCRIPT)
    for (*_, info), (_, ext, _, _, ref) in zip(steps, plain, strict=True):
        assert float(info["extrinsic_reward"]) == ext
        assert bool(info["success"]) == bool(ref["success"])
        np.testing.assert_array_equal(info["features"], ref["features"])


def test_beta_zero_is_exactly_the_extrinsic_reward() -> None:
    inner = make(EMPTY)
    env = EpisodicCountBonus(inner, beta=0.0)
    state, _ = env.reset(jax.random.key(0))
    for (_, reward, *_, info), (_, ext, *_) in zip(
        _rollout(env, state, SCRIPT), _rollout(inner, state.inner, SCRIPT), strict=True
    ):
        assert reward == ext and float(info["intrinsic_reward"]) == 0.0


def test_invalid_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="beta must be >= 0"):
        EpisodicCountBonus(make(EMPTY), beta=-0.1)
    with pytest.raises(ValueError, match="beta must be >= 0"):
        episodic_count_bonus_gym(wrap_farama(gym.make(EMPTY)), beta=-1e-3)
    not_minigrid = AutoReset(make(EMPTY), 2)  # any JaxEnv that is no MiniGrid port
    with pytest.raises(ValueError, match="pass hash_fn"):
        EpisodicCountBonus(not_minigrid)
    with pytest.raises(ValueError, match="table_size"):
        EpisodicCountBonus(not_minigrid, hash_fn=lambda s: jnp.int32(0))
    with pytest.raises(ValueError, match="Farama MiniGrid"):
        episodic_count_bonus_gym(gym.make("CartPole-v1"))


def test_custom_hash_counts_positions_only() -> None:
    env = EpisodicCountBonus(
        make(EMPTY), BETA, hash_fn=lambda s: s.agent_pos[0] * 5 + s.agent_pos[1], table_size=25
    )
    state, _ = env.reset(jax.random.key(0))
    # (2, 1), turn twice there, then back to the start cell (1, 1), counted at reset.
    bonus = [float(info["intrinsic_reward"]) for *_, info in _rollout(env, state, [F, L, L, F])]
    np.testing.assert_allclose(bonus, BETA / np.sqrt([1, 2, 3, 2]), rtol=1e-6)


def test_counts_reset_with_every_episode_inside_auto_reset() -> None:
    n = 4
    env = AutoReset(EpisodicCountBonus(make(EMPTY), BETA), n, chunks=(n,))
    step = jax.jit(env.step)
    state, _ = env.reset(jax.random.key(3))
    for _ in range(5):  # turning in place: visits pile up on the start cell
        state, *_ = step(state, jnp.full((n,), L, jnp.int32))
    np.testing.assert_array_equal(state.env_state.counts.sum(axis=1), [6] * n)
    # Envs 1 and 3 reach max_steps at the next step and start a fresh episode.
    ending = np.array([False, True, False, True])
    inner = state.env_state.inner
    inner = inner.replace(step_count=jnp.where(ending, inner.max_steps - 1, inner.step_count))
    state = state.replace(env_state=state.env_state._replace(inner=inner))
    state, _, reward, terminated, truncated, info = step(state, jnp.full((n,), L, jnp.int32))

    np.testing.assert_array_equal(truncated, ending)
    counts = np.asarray(state.env_state.counts)
    np.testing.assert_array_equal(counts.sum(axis=1), [7, 1, 7, 1])
    start = np.asarray(jax.vmap(minigrid_hash)(state.env_state.inner))
    np.testing.assert_array_equal(counts[ending, start[ending]], [1, 1])
    # The ending step was the 2nd visit of (start cell, dir) in the old episode.
    np.testing.assert_allclose(info["intrinsic_reward"], BETA / np.sqrt(2), rtol=1e-6)
    np.testing.assert_array_equal(reward, np.asarray(info["intrinsic_reward"]))
    # A first step in the new episode is a first visit again; the others keep counting.
    state, *_, info = step(state, jnp.full((n,), L, jnp.int32))
    np.testing.assert_allclose(info["intrinsic_reward"], BETA / np.sqrt([2, 1, 2, 1]), rtol=1e-6)


def _gym_and_jax_episode(env_id: str, seed: int, actions: list[int] | None):
    """Rewards and infos of one seeded level on both backends under the same actions
    (drawn from ``seed`` until the episode ends when ``actions`` is None)."""
    genv = episodic_count_bonus_gym(wrap_farama(gym.make(env_id)), BETA)
    genv.reset(seed=seed)
    jenv = EpisodicCountBonus(make(env_id), BETA)
    jstate = jenv.start(from_farama(genv))
    jstep = jax.jit(jenv.step)
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(len(actions) if actions is not None else 10**6):
        action = actions[t] if actions is not None else int(rng.choice([L, R, F, F, 3, 5]))
        _, greward, gterm, gtrunc, ginfo = genv.step(action)
        jstate, _, jreward, jterm, jtrunc, jinfo = jstep(jstate, jnp.int32(action))
        rows.append((greward, ginfo, float(jreward), jinfo))
        assert (gterm, gtrunc) == (bool(jterm), bool(jtrunc))
        if gterm or gtrunc:
            break
    return rows


@pytest.mark.parametrize(
    ("env_id", "seed", "actions"),
    [
        (EMPTY, 0, SCRIPT),
        ("MiniGrid-DoorKey-5x5-v0", 1, None),
        ("MiniGrid-DoorKey-5x5-v0", 2, None),
    ],
)
def test_jax_and_gymnasium_give_the_same_rewards(env_id, seed, actions) -> None:
    rows = _gym_and_jax_episode(env_id, seed, actions)
    assert len(rows) > 3
    greward, ginfo, jreward, jinfo = (list(c) for c in zip(*rows, strict=True))
    np.testing.assert_allclose(jreward, greward, rtol=1e-6)
    for name in ("intrinsic_reward", "extrinsic_reward"):
        np.testing.assert_allclose(
            [float(i[name]) for i in jinfo], [i[name] for i in ginfo], rtol=1e-6
        )
    assert [bool(i["success"]) for i in jinfo] == [i["success"] for i in ginfo]
    # Success is read from the env's reward below the bonus: only the last step succeeds.
    if actions is SCRIPT:
        assert ginfo[-1]["success"] and not any(i["success"] for i in ginfo[:-1])
        np.testing.assert_allclose(
            [i["intrinsic_reward"] for i in ginfo], BETA / np.sqrt(VISITS), rtol=1e-12
        )
    assert min(i["intrinsic_reward"] for i in ginfo) < BETA  # some state was revisited
