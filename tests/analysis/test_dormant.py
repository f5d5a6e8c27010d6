"""Dormant units: the normalised activity s_i of each hidden unit, computed by hand on a
two-input network, and a checkpoint's policy read back."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from flax import struct

from telapa.analysis.dormant import checkpoint_params, dormant_fractions, random_observations
from telapa.io.checkpoint import save_pytree
from telapa.rl.networks import ActorCritic

OBS = {"x": jnp.array([[1.0, 0.0], [0.0, 1.0]])}


def _network(activation: str) -> tuple[ActorCritic, dict]:
    net = ActorCritic(obs_spec=(("x", (2,), None),), n_out=2, continuous=False, hidden=(3,),
                      activation=activation)
    params = jax.tree.map(jnp.zeros_like, net.init(jax.random.key(0), OBS))
    p = params["params"]
    # actor unit 0 fires on both observations (h = 1, 1), unit 1 on none (0, 0), unit 2
    # on one (2, 0): E|h| = 1, 0, 1, mean 2/3, s = 1.5, 0, 1.5
    p["actor"]["Dense_0"]["kernel"] = jnp.array([[1.0, -1.0, 2.0], [1.0, -1.0, -1.0]])
    # every critic unit negative: nothing fires, the layer is wholly dormant
    p["critic"]["Dense_0"]["kernel"] = -jnp.ones((2, 3))
    return net, params


def test_dormant_fractions_by_hand():
    net, params = _network("relu")
    assert dormant_fractions(net, params, OBS) == {"actor.Dense_0": pytest.approx(1 / 3),
                                                   "critic.Dense_0": 1.0}
    assert dormant_fractions(net, params, OBS, tau=1.4)["actor.Dense_0"] == pytest.approx(1 / 3)
    assert dormant_fractions(net, params, OBS, tau=1.5)["actor.Dense_0"] == 1.0
    # tanh units output tanh(-1) != 0 where ReLU units are silent: none is dormant at tau 0
    net, params = _network("tanh")
    assert dormant_fractions(net, params, OBS) == {"actor.Dense_0": 0.0, "critic.Dense_0": 0.0}


@struct.dataclass
class _State:
    params: dict
    step: jax.Array


def test_checkpoint_params_reads_the_policy_back(tmp_path):
    net, params = _network("relu")
    save_pytree(tmp_path / "learner.npz", _State(params=params, step=jnp.array(3)))
    like = net.init(jax.random.key(1), OBS)
    loaded = checkpoint_params(tmp_path / "learner.npz", like)
    assert jax.tree.all(jax.tree.map(lambda a, b: bool((a == b).all()), loaded, params))
    wider = ActorCritic(obs_spec=(("x", (2,), None),), n_out=2, continuous=False, hidden=(4,))
    with pytest.raises(ValueError, match=r"learner.npz: no policy parameter .params\["):
        checkpoint_params(tmp_path / "learner.npz", wider.init(jax.random.key(1), OBS))


def test_random_observations_count():
    obs = random_observations("MiniGrid-Empty-5x5-v0", envs=4, steps=20, every=5)
    assert obs["image"].shape == (16, 7, 7, 3)
