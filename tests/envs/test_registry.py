"""The one env registry: every id to one family, both backends through the families,
the ports a family serves, and each family's trajectory codec from the env spec; the
`EnvFamily` base class, whose defaults a family does not repeat, and plug-in families
written as plain classes before it was one."""

from __future__ import annotations

import dataclasses

import gymnasium
import pytest

from telapa.envs import check_env_id, family_of, jax_env_ids, make
from telapa.envs.family import EnvFamily, NormalizedReturn, SuccessRate
from telapa.envs.generic import GenericFamily, VectorObsFeatures
from telapa.envs.minigrid import all_tasks
from telapa.envs.minigrid.family import MiniGridFamily
from telapa.envs.minigrid.features import minigrid_codec
from telapa.envs.mujoco import SKETCH_DIM, MujocoFamily
from telapa.envs.mujoco.v5 import MJX_IDS
from telapa.envs.registry import FAMILIES, GENERIC, families, register_family
from telapa.plugins import PluginError
from telapa.qd.trajectories import float16_codec


def test_every_id_has_one_family_and_the_ports_are_the_minigrid_familys():
    assert families() == ["minigrid", "mujoco", "generic"]
    assert family_of("MiniGrid-DoorKey-5x5-v0").name == "minigrid"
    assert family_of("BabyAI-GoToLocal-v0").name == "minigrid"  # Farama only, no port
    assert family_of("Hopper-v5").name == "mujoco"
    assert family_of("CartPole-v1") is GENERIC
    assert jax_env_ids() == sorted([*all_tasks(), *MJX_IDS])  # MuJoCo's on MJX
    assert [f.name for f in FAMILIES if f.jax_ids()] == ["minigrid", "mujoco"]


def test_jax_backend_makes_the_families_ports_and_names_the_alternatives():
    env = make("MiniGrid-DoorKey-5x5-v0", observe_mission=False)
    assert env.task is all_tasks()["MiniGrid-DoorKey-5x5-v0"] and "mission" not in \
        env.spec.observation
    bad = "MiniGrid-Nope-v0"
    with pytest.raises(ValueError, match=f"unknown env id '{bad}' for backend 'jax'; "
                                         "available: HalfCheetah-v5, Hopper-v5, MiniGrid-"):
        make(bad)
    with pytest.raises(ValueError, match="any gymnasium id runs with backend"):
        check_env_id(bad, "jax")
    for where in (make, lambda i: check_env_id(i, "jax")):  # Ant: not ported to MJX
        with pytest.raises(ValueError, match="^Ant-v5 has no port on backend 'jax' .*: run "
                                             "it on backend 'native'$"):
            where("Ant-v5")
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


# --- the EnvFamily base class ---------------------------------------------------------

DEFAULTS = ("check_options", "jax_ids", "make_jax", "competence", "codec", "train_preset",
            "run_preset", "count_bonus")
"""The members `EnvFamily` writes once (the abstract ones are matches, make_single and
feature_dim)."""


def test_the_built_in_families_write_only_what_differs_from_the_base():
    assert all(isinstance(f, EnvFamily) for f in (*FAMILIES, GENERIC))
    assert not set(DEFAULTS) & set(vars(GenericFamily))  # the base's defaults, all of them
    assert set(DEFAULTS) & set(vars(MujocoFamily)) == {"check_options", "competence",
                                                       "jax_ids", "make_jax"}
    assert set(DEFAULTS) & set(vars(MiniGridFamily)) == {
        "check_options", "jax_ids", "make_jax", "codec", "train_preset", "run_preset",
        "count_bonus"}
    # what the defaults give them, as each family wrote it before
    cartpole = make("CartPole-v1", "gymnasium", num_envs=1).spec
    hopper = dataclasses.replace(cartpole, env_id="Hopper-v5", feature_dim=SKETCH_DIM)
    for family, spec in ((GENERIC, cartpole), (MujocoFamily(), hopper)):
        assert (family.train_preset, family.run_preset, family.count_bonus) == (
            "mujoco", "mujoco-quick", False)
        assert family.codec(spec) == float16_codec(spec.feature_dim)
    assert GENERIC.jax_ids() == () and MujocoFamily().jax_ids() == MJX_IDS
    with pytest.raises(ValueError, match="CartPole-v1 has no JAX port"):
        GENERIC.make_jax("CartPole-v1", {})
    assert GENERIC.competence("CartPole-v1") == SuccessRate()
    assert GENERIC.check_options("CartPole-v1", {"anything": 1}) is None  # gymnasium's
    assert MujocoFamily().competence("Hopper-v5") == NormalizedReturn(3000.0)
    assert MiniGridFamily().competence("MiniGrid-Empty-5x5-v0") == SuccessRate()


class Ring(EnvFamily):
    """A plug-in family that writes only what it must: its name and the abstract members."""

    name = "ring"

    def matches(self, env_id):
        return env_id.startswith("Ring")

    def make_single(self, env_id, options):
        return VectorObsFeatures(gymnasium.make(env_id, **options))

    def feature_dim(self, env_id):
        return 4


class RingPorts(Ring):
    """Lists a JAX port but does not make it."""

    def jax_ids(self):
        return ("RingWorld-v0",)


class RingNoSketch(EnvFamily):
    name = "ring"

    def matches(self, env_id):
        return env_id.startswith("Ring")


class OldRing:
    """A plug-in family written against `EnvFamily` as a protocol: a plain class with
    every member."""

    name = "ring"
    train_preset = "mujoco"
    run_preset = "quick"
    count_bonus = False

    def matches(self, env_id):
        return env_id.startswith("Ring")

    def check_options(self, env_id, options):
        if options:
            raise ValueError(f"{env_id}: no task options, got {', '.join(options)}")

    def make_single(self, env_id, options):
        return VectorObsFeatures(gymnasium.make(env_id))

    def jax_ids(self):
        return ()

    def make_jax(self, env_id, options):
        raise ValueError(f"{env_id} has no JAX port")

    def feature_dim(self, env_id):
        return 4

    def competence(self, env_id):
        return NormalizedReturn(475.0)

    def codec(self, spec):
        return float16_codec(4)


@pytest.fixture
def ring_world(plugin_site):
    """``RingWorld-v0``, a CartPole, registered with gymnasium for the test."""
    gymnasium.register("RingWorld-v0", max_episode_steps=50,
                       entry_point="gymnasium.envs.classic_control.cartpole:CartPoleEnv")
    return "RingWorld-v0"


def test_a_plug_in_family_writes_the_abstract_members_and_gets_every_default(ring_world):
    family = register_family(Ring)
    assert family_of(ring_world) is family and families()[-2:] == ["ring", "generic"]
    assert (family.jax_ids(), family.train_preset, family.run_preset,
            family.count_bonus) == ((), "mujoco", "mujoco-quick", False)
    assert family.competence(ring_world) == SuccessRate()
    family.check_options(ring_world, {"anything": 1})
    env = make(ring_world, "gymnasium", num_envs=1)
    assert env.spec.feature_dim == 4 and family.codec(env.spec) == float16_codec(4)
    env.close()
    with pytest.raises(ValueError, match="unknown env id 'RingWorld-v0' for backend 'jax'"):
        check_env_id(ring_world, "jax")
    with pytest.raises(ValueError, match="RingWorld-v0 has no JAX port .the ring family"):
        family.make_jax(ring_world, {})


def test_a_plug_in_family_that_lacks_an_abstract_member_is_named(plugin_site):
    with pytest.raises(PluginError) as err:
        register_family(RingNoSketch)
    assert str(err.value) == (
        f"env family {__name__}.RingNoSketch does not write feature_dim, make_single: a "
        "subclass of telapa.envs.family.EnvFamily must (matches, make_single and "
        "feature_dim; the other members have defaults)")
    assert families() == ["minigrid", "mujoco", "generic"]


def test_a_port_listed_but_not_made_is_named(plugin_site):
    register_family(RingPorts)
    assert "RingWorld-v0" in jax_env_ids()
    with pytest.raises(ValueError) as err:
        make("RingWorld-v0", "jax")
    assert str(err.value) == (f"env family 'ring' ({__name__}.RingPorts) lists "
                              "'RingWorld-v0' in jax_ids but does not write make_jax")


def test_a_plain_class_of_every_member_is_still_a_plug_in_family(ring_world):
    """A family written before `EnvFamily` was a base class still registers and runs;
    one that lacks a member is named with what it lacks."""
    family = register_family(OldRing)
    assert not isinstance(family, EnvFamily) and family_of(ring_world) is family
    env = make(ring_world, "gymnasium", num_envs=1)
    assert env.spec.feature_dim == 4 and family.codec(env.spec) == float16_codec(4)
    assert family.competence(ring_world) == NormalizedReturn(475.0)
    env.close()
    with pytest.raises(ValueError, match="no task options, got friction"):
        family.check_options(ring_world, {"friction": 1.0})
    incomplete = type("OldRingNoCodec", (), {k: v for k, v in vars(OldRing).items()
                                            if k != "codec"})
    with pytest.raises(PluginError, match=r"env family test_registry\.[\w.<>]*OldRingNoCodec "
                                          r"does not follow .*EnvFamily \(missing: codec\)"):
        register_family(incomplete)
