"""Stable-Baselines3 PPO on telapa's JAX MiniGrid port through its SB3 ``VecEnv``.

    pip install stable-baselines3
    python examples/sb3_ppo_minigrid.py --total-timesteps 200000
    python examples/sb3_ppo_minigrid.py --farama   # the same PPO on Farama's envs

The adapter (`telapa.envs.sb3.make_sb3_vec_env`) steps all envs as one jitted call and
follows SB3's conventions (``terminal_observation``, ``TimeLimit.truncated``). It
observes the 7x7x3 image only (``obs_keys=("image",)``, as Farama's ``ImgObsWrapper``):
SB3's ``MultiInputPolicy`` would send a 7x7 image to its NatureCNN, too small for it.
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import minigrid  # noqa: F401  (Farama's ids, for --farama)
from minigrid.wrappers import ImgObsWrapper
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

from telapa.envs.sb3 import make_sb3_vec_env


def make_env(env_id: str, num_envs: int, seed: int, farama: bool):
    """The adapter, or with ``farama`` Farama's envs in SB3's ``DummyVecEnv``."""
    if farama:
        return make_vec_env(lambda: ImgObsWrapper(gym.make(env_id)), n_envs=num_envs,
                            seed=seed)
    return make_sb3_vec_env(f"telapa/{env_id}", num_envs, seed, obs_keys=("image",))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env-id", default="MiniGrid-DoorKey-8x8-v0")
    p.add_argument("--farama", action="store_true", help="Farama's envs instead")
    p.add_argument("--num-envs", type=int, default=16)
    p.add_argument("--n-steps", type=int, default=128)
    p.add_argument("--total-timesteps", type=int, default=200_000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    venv = make_env(args.env_id, args.num_envs, args.seed, args.farama)
    model = PPO("MlpPolicy", venv, n_steps=args.n_steps, batch_size=256, ent_coef=0.01,
                seed=args.seed, device="cpu", verbose=1)
    model.learn(args.total_timesteps)
    venv.close()


if __name__ == "__main__":
    main()
