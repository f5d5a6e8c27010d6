"""The one env registry: every id to one family, both backends through the families,
the ports a family serves, and each family's trajectory codec from the env spec."""

from __future__ import annotations

import pytest

from telapa.envs import check_env_id, family_of, jax_env_ids, make
from telapa.envs.minigrid import all_tasks
from telapa.envs.minigrid.features import minigrid_codec
from telapa.envs.registry import FAMILIES, GENERIC, families
from telapa.qd.trajectories import float16_codec


def test_every_id_has_one_family_and_the_ports_are_the_minigrid_familys():
    assert families() == ["minigrid", "mujoco", "generic"]
    assert family_of("MiniGrid-DoorKey-5x5-v0").name == "minigrid"
    assert family_of("BabyAI-GoToLocal-v0").name == "minigrid"  # Farama only, no port
    assert family_of("Hopper-v5").name == "mujoco"
    assert family_of("CartPole-v1") is GENERIC
    assert jax_env_ids() == sorted(all_tasks())
    assert [f.name for f in FAMILIES if f.jax_ids()] == ["minigrid"]


def test_jax_backend_makes_the_families_ports_and_names_the_alternatives():
    env = make("MiniGrid-DoorKey-5x5-v0", observe_mission=False)
    assert env.task is all_tasks()["MiniGrid-DoorKey-5x5-v0"] and "mission" not in \
        env.spec.observation
    for bad in ("Hopper-v5", "MiniGrid-Nope-v0"):
        with pytest.raises(ValueError, match=f"unknown env id '{bad}' for backend 'jax'; "
                                             "available: MiniGrid-BlockedUnlockPickup-v0"):
            make(bad)
        with pytest.raises(ValueError, match="any gymnasium id runs with backend"):
            check_env_id(bad, "jax")
    with pytest.raises(ValueError, match="unknown backend 'brax'"):
        make("CartPole-v1", "brax")


def test_codec_comes_from_the_env_spec():
    port = make("MiniGrid-DoorKey-8x8-v0")
    assert family_of(port.spec.env_id).codec(port.spec) == minigrid_codec(8, 8, 640)
    # an id with no port: the grid Farama builds, 9 wide and 7 high, 252 steps
    gym = make("MiniGrid-DistShift1-v0", "gymnasium", num_envs=1)
    assert "MiniGrid-DistShift1-v0" not in jax_env_ids() and gym.spec.max_steps == 252
    assert family_of(gym.spec.env_id).codec(gym.spec) == minigrid_codec(9, 7, 252)
    # a port on the gymnasium backend: Farama's env, the port's codec
    gym = make("MiniGrid-DoorKey-8x8-v0", "gymnasium", num_envs=1)
    assert family_of(gym.spec.env_id).codec(gym.spec) == minigrid_codec(8, 8, 640)
    cartpole = make("CartPole-v1", "gymnasium", num_envs=1)
    assert family_of("CartPole-v1").codec(cartpole.spec) == float16_codec(4)
