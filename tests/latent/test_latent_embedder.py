"""Episode encoder (masking, padding, truncation) and policy-level latent summaries."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from pydantic import ValidationError

from telapa.latent import (
    EpisodeEncoder,
    LatentConfig,
    embed_episodes,
    init_encoder,
    make_encoder,
    pad_episodes,
    pad_or_truncate,
    policy_summary,
    summarize,
)
from telapa.latent.embedder import encode, valid_mask

CFG = LatentConfig()


@pytest.fixture(scope="module")
def params():
    return init_encoder(jax.random.key(0), CFG)


def _episode(seed: int, t: int, d: int = 11) -> np.ndarray:
    return np.random.default_rng(seed).uniform(size=(t, d)).astype(np.float32)


def test_config_defaults_and_strictness():
    assert (CFG.latent_dim, CFG.feature_dim, CFG.t_max) == (8, 11, 256)
    assert (CFG.steps, CFG.lr, CFG.anchor_fraction, CFG.min_bank_sets) == (700, 5e-4, 0.33, 32)
    assert (CFG.temperature, CFG.sigma_min, CFG.eps, CFG.crop_min_fraction) == (
        0.15, 1e-3, 1e-8, 0.6)
    with pytest.raises(ValidationError):
        LatentConfig(latent_dims=4)
    with pytest.raises(ValidationError):
        LatentConfig(crop_min_fraction=0.0)
    hash(CFG)  # static jit argument


def test_padding_never_affects_the_embedding(params):
    clean = np.zeros((2, 20, 11), np.float32)
    clean[0, :5] = _episode(1, 5)
    clean[1, :20] = _episode(2, 20)
    lengths = np.array([5, 20])
    garbage = clean.copy()
    garbage[0, 5:] = 1e6
    garbage[0, 7] = np.nan
    z_clean = embed_episodes(params, clean, lengths, CFG)
    z_garbage = embed_episodes(params, garbage, lengths, CFG)
    np.testing.assert_array_equal(np.asarray(z_clean), np.asarray(z_garbage))
    assert z_clean.shape == (2, 8)
    # Shorter padding (T = 8) and no batch dimension give the same latent.
    z_short = embed_episodes(params, clean[0, :8], 5, CFG)
    np.testing.assert_allclose(z_short, z_clean[0], rtol=1e-5, atol=1e-6)
    # Gradients stay finite with NaN garbage in the padding.
    enc = make_encoder(CFG)
    grads = jax.grad(lambda p: enc.apply(p, garbage, lengths).sum())(params)
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree.leaves(grads))


def test_embedding_depends_on_valid_steps_and_their_order(params):
    e = _episode(3, 10)
    z = embed_episodes(params, e, 10, CFG)
    assert not np.allclose(z, embed_episodes(params, e[::-1], 10, CFG), atol=1e-4)
    assert not np.allclose(z, embed_episodes(params, e, 9, CFG), atol=1e-4)


def test_final_state_is_the_step_projection_at_the_valid_length(params):
    feats = np.stack([_episode(4, 12), _episode(5, 12)])
    lengths = np.array([7, 12])
    z_e, z_steps = make_encoder(CFG).apply(
        params, feats, lengths, method=EpisodeEncoder.encode_steps)
    np.testing.assert_allclose(z_steps[0, 6], z_e[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(z_steps[1, 11], z_e[1], rtol=1e-5, atol=1e-6)
    assert np.all(np.asarray(z_steps[0, 7:]) == 0)


def test_truncation_to_t_max_keeps_the_first_steps(params):
    long = _episode(6, 300)[None]
    feats, lengths = pad_or_truncate(jnp.asarray(long), jnp.array([300]), 256)
    assert feats.shape == (1, 256, 11) and int(lengths[0]) == 256
    np.testing.assert_array_equal(feats[0], long[0, :256])
    short, short_len = pad_or_truncate(jnp.asarray(long), jnp.array([40]), 256)
    assert int(short_len[0]) == 40 and np.all(np.asarray(short[0, 40:]) == 0)
    np.testing.assert_array_equal(short[0, :40], long[0, :40])

    padded, plens = pad_episodes([_episode(7, 3), long[0]], t_max=256)
    assert padded.shape == (2, 256, 11) and plens.tolist() == [3, 256]
    np.testing.assert_array_equal(padded[0, :3], _episode(7, 3))
    assert np.all(padded[0, 3:] == 0)
    z = embed_episodes(params, padded[1:], plens[1:], CFG)
    np.testing.assert_allclose(z, embed_episodes(params, long[:, :256], [256], CFG), rtol=1e-5)


def test_summaries_by_hand():
    # Episode latents: the third slot is empty (length 0) and must be ignored.
    z_e = jnp.array([[1.0, 2.0], [3.0, 6.0], [100.0, 100.0]])
    z_steps = jnp.array([
        [[0.0, 0.0], [2.0, 4.0], [100.0, 100.0], [100.0, 100.0]],  # l = 2
        [[1.0, 1.0], [1.0, 4.0], [1.0, 7.0], [-50.0, 50.0]],      # l = 3
        [[9.0, 9.0], [9.0, 9.0], [9.0, 9.0], [9.0, 9.0]],          # l = 0
    ])
    s = summarize(z_e, z_steps, jnp.array([2, 3, 0]))
    # z_mean = ([1,2] + [3,6]) / 2; z_std_ep = sqrt(mean((z - mean)^2)) = [1, 2]
    np.testing.assert_allclose(s.z_mean, [2.0, 4.0])
    np.testing.assert_allclose(s.z_std_ep, [1.0, 2.0])
    # s_time: episode 0 -> [1, 2]; episode 1 -> [0, sqrt(6)]; z_std_time = their mean.
    np.testing.assert_allclose(s.z_std_time, [0.5, 2.224744871], rtol=1e-6)
    np.testing.assert_allclose(s.raw, [2.0, 4.0, 1.0, 2.0, 0.5, 2.224744871], rtol=1e-6)


def test_summary_of_no_episodes_is_nan():
    s = summarize(jnp.ones((2, 3)), jnp.ones((2, 4, 3)), jnp.array([0, 0]))
    assert np.all(np.isnan(np.asarray(s.raw)))


def test_policy_summary_jit_vmap_smoke(params):
    rng = np.random.default_rng(8)
    feats = rng.uniform(size=(3, 4, 16, 11)).astype(np.float32)  # 3 policies x 4 episodes
    lengths = rng.integers(1, 17, size=(3, 4))
    batched = jax.vmap(policy_summary, in_axes=(None, 0, 0, None))(params, feats, lengths, CFG)
    assert batched.raw.shape == (3, 24)
    one = policy_summary(params, feats[1], lengths[1], CFG)
    np.testing.assert_allclose(batched.raw[1], one.raw, rtol=1e-5, atol=1e-6)
    z = embed_episodes(params, feats[1], lengths[1], CFG)
    np.testing.assert_allclose(one.z_mean, z.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(one.z_std_ep, z.std(0), rtol=1e-4, atol=1e-6)
    assert np.all(np.asarray(one.z_std_time) > 0)


class _FullLengthEncoder(nn.Module):
    """Reference phi: Flax's GRU cell stepped over all T steps (padding included), then
    h_E gathered at the valid length; same parameter names as `EpisodeEncoder`."""

    @nn.compact
    def __call__(self, features, lengths):
        x = jnp.where(valid_mask(lengths, features.shape[-2])[..., None], features, 0.0)
        x = nn.relu(nn.Dense(64, name="step_2")(nn.relu(nn.Dense(64, name="step_1")(x))))
        h = nn.RNN(nn.GRUCell(64, parent=None), name="gru")(x)
        proj_1, proj_2 = nn.Dense(64, name="proj_1"), nn.Dense(8, name="proj_2")
        steps = proj_2(nn.relu(proj_1(h)))
        last = jnp.take_along_axis(h, jnp.clip(lengths - 1, 0, None)[:, None, None], axis=1)
        z_e = proj_2(nn.relu(proj_1(jnp.where((lengths > 0)[:, None], last[:, 0], 0.0))))
        return z_e, steps


@pytest.mark.parametrize(("group", "block"), [(32, 8), (7, 5)])
def test_length_grouped_encoder_equals_the_full_length_gru(params, group, block):
    """`encode` skips padding blocks per length group: latents, per-step projections and
    parameter gradients equal the GRU run over every step (lengths 0, 1, T and T not a
    multiple of the block included)."""
    rng = np.random.default_rng(9)
    t = 45
    lengths = jnp.asarray(np.r_[0, 1, t, rng.integers(0, t + 1, 57)], jnp.int32)
    feats = jnp.asarray(rng.normal(size=(lengths.size, t, 11)), jnp.float32)
    z_ref, steps_ref = _FullLengthEncoder().apply(params, feats, lengths)
    z_e, z_steps = encode(params, feats, lengths, steps=True, group=group, block=block)
    mask = np.asarray(valid_mask(lengths, t))[..., None]
    np.testing.assert_allclose(encode(params, feats, lengths, group=group, block=block), z_ref,
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(z_e, z_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(z_steps, np.where(mask, steps_ref, 0.0), rtol=1e-5, atol=1e-6)

    def loss(encoder):
        return lambda p: jnp.sum(jnp.sin(3.0 * encoder(p)))

    g_ref = jax.grad(loss(lambda p: _FullLengthEncoder().apply(p, feats, lengths)[0]))(params)
    g = jax.grad(loss(lambda p: encode(p, feats, lengths, group=group, block=block)))(params)
    jax.tree_util.tree_map_with_path(
        lambda path, a, b: np.testing.assert_allclose(
            b, a, rtol=1e-4, atol=1e-5 * float(np.abs(a).max()),
            err_msg=jax.tree_util.keystr(path)),
        g_ref, g)


def test_policy_summary_of_many_policies_equals_one_at_a_time(params):
    rng = np.random.default_rng(10)
    feats = rng.uniform(size=(3, 4, 16, 11)).astype(np.float32)
    lengths = rng.integers(0, 17, size=(3, 4))
    lengths[:, 0] = 16
    many = policy_summary(params, feats, lengths, CFG)
    for i in range(3):
        np.testing.assert_allclose(many.raw[i], policy_summary(params, feats[i], lengths[i],
                                                               CFG).raw, rtol=1e-5, atol=1e-6)


def test_encode_of_no_episodes_has_the_right_shapes(params):
    assert encode(params, jnp.zeros((0, 20, 11)), jnp.zeros((0,), jnp.int32)).shape == (0, 8)
    z_e, z_steps = encode(params, jnp.zeros((2, 0, 20, 11)), jnp.zeros((2, 0), jnp.int32),
                          steps=True)
    assert z_e.shape == (2, 0, 8) and z_steps.shape == (2, 0, 20, 8)


def test_compiled_encoder_init_equals_the_op_by_op_one():
    """`init_encoder` runs compiled (a new process's first TeLAPA run built it op by op in
    5.6 s); the parameters are bit for bit those of the op-by-op initialisers."""
    for config in (CFG, CFG.model_copy(update={"feature_dim": 24})):
        compiled = init_encoder(jax.random.key(3), config)
        op_by_op = init_encoder.__wrapped__(jax.random.key(3), config)
        for a, b in zip(jax.tree.leaves(compiled), jax.tree.leaves(op_by_op), strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
