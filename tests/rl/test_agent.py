"""``Agent(env, config)`` makes the implementation of the env's backend, and every
compiled function of an agent lives in its one program cache, which `Agent.release`
empties."""

from __future__ import annotations

import gc
import os

import jax
import numpy as np
import pytest

from telapa.config import EvalConfig, PPOConfig, TrainConfig
from telapa.envs import make
from telapa.rl.agent import Agent, stack_states
from telapa.rl.gym_agent import GymAgent
from telapa.rl.jax_agent import JaxAgent

from .toy_envs import Corridor

CONFIG = TrainConfig(ppo=PPOConfig(num_envs=4, n_steps=8, batch_size=16, epochs=1),
                     eval=EvalConfig(episodes=4))


def test_the_env_picks_the_implementation():
    jax_agent = Agent(Corridor(), CONFIG)
    assert type(jax_agent) is JaxAgent and isinstance(jax_agent, Agent)
    assert jax_agent.backend == "jax"
    by_id = Agent("MiniGrid-Empty-5x5-v0", CONFIG)
    assert type(by_id) is JaxAgent and by_id.spec.env_id == "MiniGrid-Empty-5x5-v0"
    gym = Agent("MiniGrid-Empty-5x5-v0", CONFIG, backend="gymnasium")
    assert type(gym) is GymAgent and gym.backend == "gymnasium"
    assert gym.env.num_envs == 4 and gym.iterations_per_call == 1
    vector = make("MiniGrid-Empty-5x5-v0", "gymnasium", num_envs=4)
    assert type(Agent(vector, CONFIG)) is GymAgent
    assert type(JaxAgent(Corridor(), CONFIG)) is JaxAgent  # the implementations directly


def test_construction_errors():
    with pytest.raises(ValueError, match="intrinsic_beta needs an env id"):
        Agent(Corridor(), CONFIG, intrinsic_beta=0.1)
    with pytest.raises(ValueError, match="env has 2 copies but ppo.num_envs=4"):
        Agent(make("MiniGrid-Empty-5x5-v0", "gymnasium", num_envs=2), CONFIG)
    with pytest.raises(ValueError, match="unknown backend 'torch'"):
        Agent("MiniGrid-Empty-5x5-v0", CONFIG, backend="torch")


def test_batched_programs_run_on_the_jax_backend_only():
    gym = Agent("MiniGrid-Empty-5x5-v0", CONFIG, backend="gymnasium")
    state = gym.start(gym.init_ppo(jax.random.key(0)), jax.random.key(1))
    with pytest.raises(ValueError, match="train_and_evaluate runs on the jax backend"):
        gym.train_and_evaluate(stack_states([state]), 32, episodes=0,
                               keys=jax.random.key(0)[None])
    with pytest.raises(ValueError, match="observation_sampler runs on the jax backend"):
        gym.observation_sampler(16)


def test_one_program_cache():
    agent = Agent(Corridor(), CONFIG)
    state = agent.start(agent.init_ppo(jax.random.key(0)), jax.random.key(1))
    state, _ = agent.train(state, CONFIG.ppo.rollout_size)
    agent.evaluate(state.ppo.params, 4, jax.random.key(2))
    agent.evaluate_batch(stack_states([state.ppo.params] * 2), 4,
                         jax.random.split(jax.random.key(3), 2))
    agent.sample_observations(state.ppo.params, 10, jax.random.key(4))
    assert sorted(key[0] for key in agent._programs) == [
        "evaluate", "evaluate-batch", "reset", "sample-observations", "train-call"]
    assert agent.compile_s > 0
    calls = len(agent._programs)
    agent.train(state, CONFIG.ppo.rollout_size)  # same shapes: no new program
    assert len(agent._programs) == calls


def _maps() -> int:
    with open("/proc/self/maps", "rb") as maps:
        return sum(1 for _ in maps)


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="Linux's map count")
def test_release_frees_the_compiled_code_and_changes_no_result():
    """`Agent.release` drops the agent's programs, and with them the memory maps of their
    compiled code (XLA's CPU backend maps each kernel on its own; Linux caps the maps a
    process may hold); the next call builds the program again, with the same result.

    Counted against the maps before the program was built: how many a program takes
    depends on XLA's flags (the suite's, tests/conftest.py: about 90 for this one; the
    default's about 290), and a threshold of 100 freed maps failed run alone."""
    agent = Agent("MiniGrid-Empty-5x5-v0", CONFIG)
    params = agent.init_ppo(jax.random.key(0)).params
    start = _maps()
    before = agent.evaluate(params, 4, jax.random.key(1))
    assert agent.live_programs == 1
    added = _maps() - start
    assert added > 30  # its kernels' code
    agent.release()
    gc.collect()
    assert agent.live_programs == 0
    assert _maps() <= start + added // 10  # (almost) every map the program added is gone
    again = agent.evaluate(params, 4, jax.random.key(1))
    assert agent.live_programs == 1
    np.testing.assert_array_equal(again.returns, before.returns)
    np.testing.assert_array_equal(again.lengths, before.lengths)


@pytest.mark.parametrize("backend", ["jax", "gymnasium"])
def test_feature_steps_keep_the_first_steps_of_a_batch_evaluation(backend):
    """``evaluate_batch(..., feature_steps=k)`` on the jax and gymnasium backends: the
    first k steps' features of the full evaluation, the same returns and lengths (the
    native backend's, which also skips the sketch: tests/envs/test_mujoco_native.py)."""
    agent = Agent("MiniGrid-Empty-5x5-v0", CONFIG, backend=backend)
    params = agent.init_ppo(jax.random.key(0)).params
    stacked = stack_states([params] * 2)
    keys = jax.random.split(jax.random.key(5), 2)
    full = agent.evaluate_batch(stacked, 2, keys)
    short = agent.evaluate_batch(stacked, 2, keys, feature_steps=7)
    for a, b in zip(full, short, strict=True):
        np.testing.assert_array_equal(a.returns, b.returns)
        np.testing.assert_array_equal(a.lengths, b.lengths)
        assert a.features.shape[1] > 7 and b.features.shape[1] == 7
        np.testing.assert_array_equal(a.features[:, :7], b.features)
    with pytest.raises(ValueError, match="feature_steps must be an integer >= 1, got 0"):
        agent.evaluate_batch(stacked, 2, keys, feature_steps=0)


def test_the_lr_schedule_spans_the_whole_calls_a_budget_trains():
    """``total_steps`` is trained in whole calls (``telapa train`` rounds a budget up to
    them), so ``anneal_lr``'s schedule spans every iteration of them: 9 steps with
    iterations of 4 envs x 8 steps, 4 iterations a call, train one call, 4 iterations
    (not ceil(9 / 32) = 1, which left the call's last 3 iterations at lr 0)."""
    annealed = CONFIG.model_copy(update={"ppo": CONFIG.ppo.model_copy(
        update={"anneal_lr": True, "iterations_per_call": 4})})
    assert Agent(Corridor(), annealed, total_steps=9).total_updates == 4
    assert Agent(Corridor(), annealed, total_steps=128).total_updates == 4  # whole: as is
    assert Agent(Corridor(), annealed, total_steps=129).total_updates == 8
    host = Agent("MiniGrid-Empty-5x5-v0", annealed, backend="gymnasium", total_steps=33)
    assert host.iterations_per_call == 1 and host.total_updates == 2  # one rollout a call
