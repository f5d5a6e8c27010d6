"""Networks: shapes, encoders, DFF, flat parameter vectors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from telapa.config import NetworkConfig
from telapa.envs.base import ArraySpec, EnvSpec
from telapa.envs.minigrid.observation import observation_specs
from telapa.rl.networks import Encoder, dff, flatten_params, num_params, sincos
from telapa.rl.policy import Categorical, DiagGaussian, Policy

MINIGRID_SPEC = EnvSpec(
    env_id="MiniGrid-Fake-v0",
    observation=observation_specs(),
    n_actions=7,
    max_steps=10,
    feature_dim=11,
)
VECTOR_SPEC = EnvSpec(
    env_id="Vec", observation={"obs": ArraySpec((5,), jnp.float32)}, action_dim=3,
    action_low=-2.0, action_high=2.0,
)


def _minigrid_obs(batch):
    key = jax.random.key(0)
    return {
        "image": jax.random.randint(key, (*batch, 7, 7, 3), 0, 11).astype(jnp.uint8),
        "direction": jnp.zeros(batch, jnp.int32),
        "mission": jnp.full((*batch, 2), 2, jnp.int32),
    }


@pytest.mark.parametrize(
    "encoder, activation", [("flat", "relu"), ("cnn", "tanh"), ("cnn", "dff")]
)
def test_minigrid_policy_shapes(encoder, activation):
    policy = Policy.create(MINIGRID_SPEC, NetworkConfig(encoder=encoder, activation=activation))
    params = jax.jit(policy.init)(jax.random.key(0))
    for batch in [(), (2, 3)]:
        dist, value = jax.jit(lambda p, o: policy(p, o))(params, _minigrid_obs(batch))
        assert isinstance(dist, Categorical)
        assert dist.logits.shape == (*batch, 7) and value.shape == batch


def test_sb3_mlp_parameter_count():
    # SB3 MlpPolicy on a 5-d obs, 3-d Box action: two 5-64-64 towers, heads 64->3, 64->1,
    # log_std 3:  2*(5*64+64 + 64*64+64) + (64*3+3) + (64+1) + 3 = 9088 + 260 + 3 = 9351
    policy = Policy.create(VECTOR_SPEC, NetworkConfig())
    assert num_params(policy.init(jax.random.key(0))) == 9351


def test_gaussian_policy_clips_env_action():
    policy = Policy.create(VECTOR_SPEC, NetworkConfig())
    params = policy.init(jax.random.key(0))
    params["params"]["log_std"] = jnp.full(3, 3.0)  # std 20: samples leave [-2, 2]
    a = policy.act(params, {"obs": jnp.zeros((64, 5))}, jax.random.key(1))
    assert isinstance(policy(params, {"obs": jnp.zeros(5)})[0], DiagGaussian)
    assert jnp.abs(a.action).max() > 2.0
    assert jnp.abs(a.env_action).max() <= 2.0
    np.testing.assert_allclose(a.env_action, jnp.clip(a.action, -2.0, 2.0))


def test_dff_doubles_width_with_sin_cos():
    z = jnp.array([[0.0, jnp.pi / 2]])
    np.testing.assert_allclose(dff(z), [[0.0, 1.0, 1.0, 0.0]], atol=1e-6)
    policy = Policy.create(VECTOR_SPEC, NetworkConfig(hidden=(8,), activation="dff"))
    params = policy.init(jax.random.key(0))
    # second layer (the policy head) sees 2*8 inputs
    assert params["params"]["Dense_0"]["kernel"].shape == (16, 3)


@pytest.mark.parametrize("scale", [1.0, 30.0, 1e3, 1e5])
def test_sincos_matches_float64_sin_and_cos(scale):
    """Every quadrant, signs, magnitudes up to 1e5: absolute error below 1e-7 (XLA's own
    float32 sin: 3e-8)."""
    z = np.random.default_rng(0).uniform(-scale, scale, 100_000).astype(np.float32)
    z[:9] = [0.0, -0.0, np.pi / 4, np.pi / 2, np.pi, -np.pi / 2, 3 * np.pi / 2, 1e-30, -2.5]
    # as processes compile it (the suite compiles at level 0, whose contracted
    # multiply-adds lose the range reduction's exactness: 1e-6 at 1e5; tests/conftest.py)
    sin, cos = jax.jit(sincos).lower(z).compile(
        compiler_options={"xla_backend_optimization_level": 2,
                          "xla_cpu_use_fusion_emitters": True})(z)
    assert sin.dtype == cos.dtype == jnp.float32
    exact = z.astype(np.float64)
    assert np.abs(np.asarray(sin, np.float64) - np.sin(exact)).max() < 1e-7
    assert np.abs(np.asarray(cos, np.float64) - np.cos(exact)).max() < 1e-7


def test_sincos_derivative_is_cos_and_minus_sin():
    z = jnp.array([0.3, 2.0, -5.0, 40.0])
    grad = jax.grad(lambda v: (sincos(v)[0] + 2 * sincos(v)[1]).sum())(z)
    np.testing.assert_allclose(grad, np.cos(z) - 2 * np.sin(z), atol=3e-7)
    assert np.isnan(sincos(jnp.float32(jnp.inf))[0]) and np.isnan(sincos(jnp.nan)[1])


def _obs_spec():
    return tuple((k, s.shape, s.levels) for k, s in sorted(MINIGRID_SPEC.observation.items()))


def test_encoder_one_hots_and_no_mission():
    enc = Encoder(_obs_spec(), "flat", "tanh")
    obs = {
        "image": jnp.ones((7, 7, 3), jnp.uint8),
        "direction": jnp.int32(2),
        "mission": jnp.array([3, 5], jnp.int32),
    }
    out = enc.apply({}, obs)
    # sorted keys: direction (4) | image (147) | mission colour (6) + type (11)
    assert out.shape == (4 + 147 + 6 + 11,)
    np.testing.assert_array_equal(out[:4], [0, 0, 1, 0])
    np.testing.assert_array_equal(out[4:151], 1.0)
    np.testing.assert_array_equal(out[151:157], np.eye(6)[3])
    np.testing.assert_array_equal(out[157:], np.eye(11)[5])
    none = enc.apply({}, {**obs, "mission": jnp.array([-1, -1], jnp.int32)})
    np.testing.assert_array_equal(none[151:], 0.0)


def test_encoder_grid_codes_unit_and_onehot():
    # one view cell holds a locked (2) yellow (4) door (4); the rest (0, 0, 0)
    image = jnp.zeros((7, 7, 3), jnp.uint8).at[0, 1].set(jnp.array([4, 4, 2], jnp.uint8))
    obs = {"image": image, "direction": jnp.int32(0), "mission": jnp.array([-1, -1])}
    unit = Encoder(_obs_spec(), "flat", "tanh", "unit").apply({}, obs)
    assert unit.shape == (4 + 147 + 17,)
    grid = np.asarray(unit[4:151]).reshape(7, 7, 3)
    # object codes /10, colours /5, states /2 (levels 11, 6, 3)
    np.testing.assert_allclose(grid[0, 1], [0.4, 0.8, 1.0], rtol=1e-6)
    assert np.count_nonzero(grid) == 3
    onehot = Encoder(_obs_spec(), "flat", "tanh", "onehot").apply({}, obs)
    assert onehot.shape == (4 + 49 * (11 + 6 + 3) + 17,)
    cells = np.asarray(onehot[4:4 + 49 * 20]).reshape(7, 7, 20)
    np.testing.assert_array_equal(cells[0, 1], np.concatenate(
        [np.eye(11)[4], np.eye(6)[4], np.eye(3)[2]]))
    np.testing.assert_array_equal(cells[3, 3], np.concatenate(
        [np.eye(11)[0], np.eye(6)[0], np.eye(3)[0]]))


def test_levels_must_fit_the_shape():
    with pytest.raises(ValueError, match="levels"):
        ArraySpec((7, 7, 3), np.uint8, levels=(11, 6))


def test_flat_params_roundtrip():
    policy = Policy.create(MINIGRID_SPEC, NetworkConfig(encoder="cnn"))
    params = jax.jit(policy.init)(jax.random.key(0))
    vec, unravel = flatten_params(params)
    assert vec.shape == (num_params(params),)
    rebuilt = unravel(vec + 1.0)
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(rebuilt), strict=True):
        np.testing.assert_allclose(b, a + 1.0)
    # unravel is vmappable: a population of 3 flat vectors -> 3 stacked pytrees
    pop = jax.vmap(unravel)(jnp.stack([vec, vec, vec]))
    values = jax.jit(jax.vmap(lambda p: policy(p, _minigrid_obs((4,)))[1]))(pop)
    assert values.shape == (3, 4)
