"""`Agent.train_and_evaluate`: a chunk's PPO iterations and its evaluation as one compiled
program for S stacked states. It equals `Agent.train` then `Agent.evaluate` (exactly for
one state, but for the returns' last bits under the suite's compile flags; to float
tolerance for a batch), reruns bit for bit, rounds budgets to PPO
iterations only, brings its results back in one `fetch`, and names a member whose loss
is not finite."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from telapa.config import EvalConfig, PPOConfig, TrainConfig
from telapa.rl import agent as agent_module
from telapa.rl.agent import Agent, BatchMemberError, stack_states, unstack_states

from .toy_envs import Corridor

CONFIG = TrainConfig(
    ppo=PPOConfig(num_envs=8, n_steps=16, batch_size=64, epochs=2, lr=3e-3,
                  iterations_per_call=2),
    eval=EvalConfig(episodes=12),
)
ROLLOUT = CONFIG.ppo.rollout_size
LOOP_EMITTERS = "xla_cpu_use_fusion_emitters=false" in os.environ.get("XLA_FLAGS", "")
"""Compiled with XLA CPU's loop emitters (tests/conftest.py's FAST_COMPILE_FLAGS): the
evaluation inside the chunk's program and `Agent.evaluate` alone then give returns a
few ulps apart (0.15625 and 0.15625003; two ulps in another run); with XLA's default
emitters they are equal."""
COLUMNS = ("loss", "pg_loss", "v_loss", "entropy", "approx_kl", "grad_norm", "episodes",
           "success_rate", "step")


@pytest.fixture(scope="module")
def agent():
    return Agent(Corridor(), CONFIG)


def _start(agent: Agent, seed: int):
    return agent.start(agent.init_ppo(jax.random.key(seed)), jax.random.key(100 + seed))


def _old_path(agent: Agent, state, steps: int, key):
    state, history = agent.train(state, steps)
    return state, history, agent.evaluate(state.ppo.params, 12, key)


def _assert_close(a, b, exact: bool) -> None:
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        if exact:
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
        else:
            np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-6)


def test_one_state_equals_train_then_evaluate_and_reruns_bit_for_bit(agent, monkeypatch):
    fetched = []
    monkeypatch.setattr(agent_module, "fetch", lambda tree: fetched.append(1) or
                        jax.device_get(tree))
    state, key = _start(agent, 0), jax.random.key(7)
    expected_state, history, evaluation = _old_path(agent, state, 4 * ROLLOUT, key)
    for _ in range(2):  # a rerun gives the same bits
        new, result = agent.train_and_evaluate(stack_states([state]), 4 * ROLLOUT,
                                               episodes=12, keys=key[None])
        _assert_close(expected_state, jax.tree.map(lambda x: x[0], new), exact=True)
        assert [[row[c] for c in COLUMNS] for row in result.metrics[0]] == \
            [[row[c] for c in COLUMNS] for row in history]
        (got,) = result.evaluations
        if LOOP_EMITTERS:  # the two programs round the returns' arithmetic differently
            np.testing.assert_allclose(got.returns, evaluation.returns, rtol=1e-6, atol=0)
        else:
            np.testing.assert_array_equal(got.returns, evaluation.returns)
        np.testing.assert_array_equal(got.lengths, evaluation.lengths)
        np.testing.assert_array_equal(got.features, evaluation.features)
    assert len(fetched) == 2  # one transfer per program call


def test_a_batch_equals_each_member_alone(agent):
    states = [_start(agent, seed) for seed in (1, 2, 3)]
    keys = jax.random.split(jax.random.key(8), 3)
    new, result = agent.train_and_evaluate(stack_states(states), 2 * ROLLOUT, episodes=12,
                                           keys=keys, features=False)
    for state, member, rows, got, key in zip(states, unstack_states(new), result.metrics,
                                             result.evaluations, keys, strict=True):
        expected_state, history, evaluation = _old_path(agent, state, 2 * ROLLOUT, key)
        _assert_close(expected_state, member, exact=False)
        np.testing.assert_allclose([[row[c] for c in COLUMNS] for row in rows],
                                   [[row[c] for c in COLUMNS] for row in history],
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got.returns, evaluation.returns)
        assert got.features.shape == (12, 0, Corridor().spec.feature_dim)
    assert not np.array_equal(result.evaluations[0].returns, result.evaluations[1].returns) \
        or not np.array_equal(result.metrics[0][-1]["loss"], result.metrics[1][-1]["loss"])


def test_budgets_are_whole_iterations_not_whole_calls(agent):
    """``iterations_per_call`` = 2 does not round a 3-iteration budget up to 4."""
    state = _start(agent, 4)
    new, result = agent.train_and_evaluate(stack_states([state]), 3 * ROLLOUT - 5,
                                           episodes=0, keys=jax.random.key(0)[None])
    assert [row["step"] for row in result.metrics[0]] == [ROLLOUT, 2 * ROLLOUT, 3 * ROLLOUT]
    assert int(new.steps[0]) == 3 * ROLLOUT and result.evaluations == []


def test_a_non_finite_loss_names_the_member_and_step(agent):
    good, bad = _start(agent, 5), _start(agent, 6)
    bad = bad.replace(ppo=bad.ppo.replace(
        params=jax.tree.map(lambda p: p * jnp.nan, bad.ppo.params)))
    with pytest.raises(BatchMemberError, match=rf"batch member 1: PPO on {Corridor().spec.env_id}"
                       rf": non-finite loss, pg_loss, v_loss.* at step {ROLLOUT}") as error:
        agent.train_and_evaluate(stack_states([good, bad]), ROLLOUT, episodes=0,
                                 keys=jax.random.split(jax.random.key(0), 2))
    assert error.value.member == 1 and isinstance(error.value.error, FloatingPointError)
