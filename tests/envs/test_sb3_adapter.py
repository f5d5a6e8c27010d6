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


def test_seeds_past_32_bits_are_their_own(sb3):
    """A seed keeps all its bits, as gymnasium's seeding does: 2**32 starts other levels
    than 0 (the low 32 bits alone gave the same), and 2**63 is a seed, not an
    OverflowError."""
    from telapa.envs.sb3 import make_sb3_vec_env

    def levels(seed):
        return make_sb3_vec_env("telapa/MiniGrid-DoorKey-5x5-v0", 4, seed=seed,
                                monitor=False).reset()["image"]

    assert not np.array_equal(levels(0), levels(2**32))
    assert np.array_equal(levels(2**63), levels(2**63))


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


@pytest.mark.parametrize("env_id", ["Hopper-v5", "HalfCheetah-v5"])
def test_mujoco_ids_step_as_sb3s_dummy_vec_env_of_gymnasiums_env(sb3, env_id):
    """``make_sb3_vec_env("telapa/<Id>")`` of a MuJoCo id: SB3's ``DummyVecEnv`` of
    gymnasium's env, seeded alike, step for step and bit for bit (observations, float32
    rewards, dones, ``terminal_observation`` and ``TimeLimit.truncated``), through
    terminations and truncations (limit 30), with a fifth of the actions out of range."""
    import gymnasium as gym

    from telapa.envs.sb3 import make_sb3_vec_env

    n = 3
    ours = make_sb3_vec_env(f"telapa/{env_id}", n, seed=4, monitor=False,
                            max_episode_steps=30)
    ref = sb3.common.vec_env.DummyVecEnv(
        [lambda: gym.make(env_id, max_episode_steps=30) for _ in range(n)])
    ref.seed(4)
    assert ours.observation_space == ref.observation_space
    assert ours.action_space == ref.action_space
    got, want = ours.reset(), ref.reset()
    assert got.dtype == want.dtype and (got == want).all()
    rng, ends = np.random.default_rng(0), {False: 0, True: 0}
    for t in range(70):
        actions = (1.2 * rng.standard_normal((n, *ours.action_space.shape))).astype(np.float32)
        got, want = ours.step(actions), ref.step(actions)
        for a, b in zip(got[:3], want[:3], strict=True):
            assert a.dtype == b.dtype, (t, a.dtype, b.dtype)
            np.testing.assert_array_equal(a, b, err_msg=f"step {t}")
        for mine, theirs in zip(got[3], want[3], strict=True):
            assert mine["TimeLimit.truncated"] == theirs["TimeLimit.truncated"]
            assert ("terminal_observation" in mine) == ("terminal_observation" in theirs)
            if "terminal_observation" in mine:
                np.testing.assert_array_equal(mine["terminal_observation"],
                                              theirs["terminal_observation"])
                ends[mine["TimeLimit.truncated"]] += 1
    assert ends[True] > 0 and (ends[False] > 0 or env_id == "HalfCheetah-v5"), ends


def test_ppo_trains_on_a_mujoco_id(sb3):
    from telapa.envs.sb3 import make_sb3_vec_env

    venv = make_sb3_vec_env("telapa/Hopper-v5", 2, seed=0, friction=0.75)
    model = sb3.PPO("MlpPolicy", venv, n_steps=64, batch_size=64, n_epochs=2, seed=0,
                    device="cpu")
    model.learn(256)
    assert model.num_timesteps == 256 and len(model.ep_info_buffer) > 0


def test_arguments_of_the_wrong_kind_are_named(sb3):
    """Each names the argument, the id and the value; a string ``obs_keys`` is one key
    (``"image"`` as ``("image",)``), not its letters."""
    from telapa.envs.sb3 import make_sb3_vec_env

    name = EMPTY.split("/")[1]
    for kwargs, message in [
            ({"num_envs": "2"}, f"{name}: num_envs must be an integer >= 1, got '2'"),
            ({"num_envs": 2.0}, f"{name}: num_envs must be an integer >= 1, got 2.0"),
            ({"num_envs": 2, "seed": "0"}, f"{name}: seed must be an integer >= 0 or "
                                           "None, got '0'"),
            ({"num_envs": 2, "obs_keys": ("image", "mission")}, f"{name}: obs_keys must "),
            ({"num_envs": 2, "obs_keys": 3}, f"{name}: obs_keys must .* got 3"),
            ({"num_envs": 2, "friction": 0.5}, f"{name}: friction: not an option")]:
        with pytest.raises(ValueError, match=message):
            make_sb3_vec_env(EMPTY, **kwargs)
    venv = make_sb3_vec_env(EMPTY, 2, obs_keys="image", monitor=False)
    assert venv.observation_space.shape == (7, 7, 3) and venv.reset().shape == (2, 7, 7, 3)
    venv.reset()
    with pytest.raises(ValueError, match=f"{name}: unknown action 7"):
        venv.step(np.array([0, 7]))
    with pytest.raises(ValueError, match="Hopper-v5: num_envs must be an integer >= 1"):
        make_sb3_vec_env("telapa/Hopper-v5", "2")
    with pytest.raises(ValueError, match="Hopper-v5: obs_keys selects"):
        make_sb3_vec_env("telapa/Hopper-v5", 2, obs_keys=("image",))
    with pytest.raises(Exception, match="no telapa env 'Humanoid-v5'; supported: "):
        make_sb3_vec_env("telapa/Humanoid-v5", 2)
