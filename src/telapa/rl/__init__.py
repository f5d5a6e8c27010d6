"""PPO in JAX for every env backend: networks, the PPO update, rollouts, the agent.

Importing the package imports the implementations of `telapa.rl.agent.Agent`
(`JaxAgent`, `GymAgent`, `NativeAgent`), so that ``Agent(env, config)`` finds the one of
its backend.
"""

from telapa.rl.agent import Agent, TrainState
from telapa.rl.evaluate import EvalResult, evaluate_gym, make_jax_evaluator
from telapa.rl.gym_agent import GymAgent, NativeAgent
from telapa.rl.jax_agent import JaxAgent
from telapa.rl.networks import ActorCritic, Params, flatten_params, make_network, num_params
from telapa.rl.policy import Categorical, DiagGaussian, Policy
from telapa.rl.ppo import PPOState, Trajectory, gae, make_learn, make_optimizer, ppo_loss
from telapa.rl.trainer import PPOTrainer

__all__ = [
    "ActorCritic",
    "Agent",
    "Categorical",
    "DiagGaussian",
    "EvalResult",
    "GymAgent",
    "JaxAgent",
    "NativeAgent",
    "PPOState",
    "PPOTrainer",
    "Params",
    "Policy",
    "TrainState",
    "Trajectory",
    "evaluate_gym",
    "flatten_params",
    "gae",
    "make_jax_evaluator",
    "make_learn",
    "make_network",
    "make_optimizer",
    "num_params",
    "ppo_loss",
]
