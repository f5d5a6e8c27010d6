"""`telapa.envs.sb3`: the ports as a Stable-Baselines3 `VecEnv`.

Skipped where SB3 is not installed (it is in the ``bench`` extra, not ``dev``: see
docs/gym-vector.md); the message naming ``pip install stable-baselines3`` is checked
everywhere.
"""

from __future__ import annotations

import importlib
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

EMPTY = "telapa/MiniGrid-Empty-5x5-v0"
N_ENVS = 8


def test_a_missing_sb3_is_named_with_its_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "stable_baselines3.common.vec_env", None)
    monkeypatch.delitem(sys.modules, "telapa.envs.sb3", raising=False)
    with pytest.raises(ImportError, match="pip install stable-baselines3"):
        importlib.import_module("telapa.envs.sb3")


@pytest.fixture(scope="module")
def sb3():
    sb3 = pytest.importorskip("stable_baselines3")
    import torch

    torch.set_num_threads(1)  # two cores, shared with JAX
    return sb3


def test_the_adapter_follows_sb3s_autoreset_conventions(sb3):
    from telapa.envs.sb3 import make_sb3_vec_env

    venv = make_sb3_vec_env(EMPTY, N_ENVS, seed=0, monitor=False)
    assert isinstance(venv, sb3.common.vec_env.VecEnv)
    assert set(venv.observation_space.spaces) == {"image", "direction"}
    obs = venv.reset()
    again = make_sb3_vec_env(EMPTY, N_ENVS, seed=0, monitor=False).reset()
    assert all((obs[k] == again[k]).all() for k in obs)
    rng, steps = np.random.default_rng(0), np.zeros(N_ENVS, int)
    ends = {"terminated": 0, "truncated": 0}
    for _ in range(110):  # Empty-5x5's limit is 100 steps
        obs, reward, dones, infos = venv.step(rng.integers(0, 3, N_ENVS))
        steps += 1
        # writable: SB3 adds a truncated episode's bootstrap value into it in place
        assert reward.dtype == np.float32 and reward.flags.writeable
        for i in range(N_ENVS):
            assert venv.observation_space.contains({k: obs[k][i] for k in obs})
            assert dones[i] == ("terminal_observation" in infos[i])
            if dones[i]:
                truncated = infos[i]["TimeLimit.truncated"]
                assert truncated == (steps[i] == 100) and (reward[i] > 0) != truncated
                final = infos[i]["terminal_observation"]
                assert set(final) == {"image", "direction"} and final["image"].shape == (7, 7, 3)
                ends["truncated" if truncated else "terminated"] += 1
                steps[i] = 0
    assert min(ends.values()) > 0, ends


def test_ppo_trains_on_the_adapter(sb3):
    from telapa.envs.sb3 import make_sb3_vec_env

    venv = make_sb3_vec_env(EMPTY, N_ENVS, seed=0, obs_keys=("image",))
    model = sb3.PPO("MlpPolicy", venv, n_steps=32, batch_size=128, n_epochs=2, seed=0,
                    device="cpu")
    before = set(Path(tempfile.gettempdir()).glob("SB3-*"))
    model.learn(512)
    assert model.num_timesteps == 512 and len(model.ep_info_buffer) > 0
    # SB3's logger wrote into the session's folder (tests/conftest.py), not a new
    # tempdir/SB3-<date> of its own
    assert set(Path(tempfile.gettempdir()).glob("SB3-*")) == before
