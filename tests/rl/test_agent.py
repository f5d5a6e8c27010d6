"""``Agent(env, config)`` makes the implementation of the env's backend, and every
compiled function of an agent lives in its one program cache."""

from __future__ import annotations

import jax
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
