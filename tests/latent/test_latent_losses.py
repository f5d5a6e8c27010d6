"""InfoNCE and distillation by hand; batch composition; the boundary update."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from telapa.latent import (
    Bank,
    LatentConfig,
    bank_ready,
    boundary_update,
    distillation,
    info_nce,
    init_encoder,
    sample_batch,
)
from telapa.latent.embedder import encode
from telapa.latent.losses import (
    boundary_loss,
    boundary_updates,
    pad_bank,
    padded_size,
    sample_rows,
)


def test_info_nce_by_hand_two_pairs():
    # zbar1 = [[1, 0], [0, 1]], zbar2 = [[1/sqrt2, 1/sqrt2], [1, 0]], tau = 0.5:
    # s = [[sqrt2, 2], [sqrt2, 0]]
    # L12 = -1/2 [log(e^sqrt2 / (e^sqrt2 + e^2)) + log(e^0 / (e^sqrt2 + e^0))] = 1.3300847
    # L21 = -1/2 [log(e^sqrt2 / (e^sqrt2 + e^sqrt2)) + log(e^0 / (e^2 + e^0))] = 1.4100376
    z1 = jnp.array([[3.0, 0.0], [0.0, 1.0]])
    z2 = jnp.array([[1.0, 1.0], [2.0, 0.0]])
    np.testing.assert_allclose(info_nce(z1, z2, 0.5), (1.3300847 + 1.4100376) / 2, rtol=1e-6)
    # Swapping the views swaps L12 and L21: the loss is symmetric.
    np.testing.assert_allclose(info_nce(z2, z1, 0.5), 1.3700611, rtol=1e-6)


def test_info_nce_by_hand_three_orthogonal_pairs():
    # s = I / 1: each row/column gives -log(e / (e + 2)) = log(1 + 2/e) = 0.55144471
    z = jnp.eye(3) * jnp.array([[1.0], [2.0], [5.0]])
    np.testing.assert_allclose(info_nce(z, jnp.eye(3), 1.0), 0.55144471, rtol=1e-6)
    # Lower temperature sharpens: log(1 + 2 e^-10) at tau = 0.1.
    np.testing.assert_allclose(info_nce(z, jnp.eye(3), 0.1), 9.0796e-5, atol=1e-6)


def test_distillation_by_hand():
    z_s = jnp.array([[3.0, 4.0], [1.0, 0.0], [0.0, 2.0]])
    z_t = jnp.array([[6.0, 8.0], [0.0, 1.0], [5.0, 5.0]])
    anchor = jnp.array([True, True, False])
    # i=0: same direction (dir 0), norms 5 vs 10 (scale 25)
    # i=1: (1,0) vs (0,1): dir = mean(1, 1) = 1, norms equal (scale 0); i=2 is not an anchor
    total, l_dir, l_scale = distillation(z_s, z_t, anchor, 0.5)
    np.testing.assert_allclose([l_dir, l_scale, total], [0.5, 12.5, 0.5 + 0.5 * 12.5], rtol=1e-6)
    zero = distillation(z_s, z_t, jnp.zeros(3, bool), 1.0)
    assert all(float(v) == 0.0 for v in zero)
    # Zero vectors: finite value and gradient.
    g = jax.grad(lambda z: distillation(z, z_t, anchor, 1.0)[0])(jnp.zeros((3, 2)))
    assert np.all(np.isfinite(np.asarray(g)))


def _id_bank(s: int, n_anchor: int, e: int = 3, t: int = 6) -> Bank:
    """features[s, e, :, 0] = s, [..., 1] = e; slot e = 2 of odd sets is empty."""
    f = np.zeros((s, e, t, 11), np.float32)
    f[..., 0] = np.arange(s)[:, None, None]
    f[..., 1] = np.arange(e)[None, :, None]
    lengths = np.full((s, e), t, np.int32)
    lengths[1::2, 2] = 0
    return Bank(jnp.asarray(f), jnp.asarray(lengths), jnp.asarray(np.arange(s) < n_anchor))


@pytest.mark.parametrize(
    ("s", "n_anchor", "batch", "want"),
    [(10, 4, 8, 3),   # round(0.33 * 8) = 3 >= min_anchors 2
     (10, 8, 8, 6),   # only 2 replay sets: anchors fill the batch
     (10, 1, 8, 1),   # only 1 anchor in the bank
     (5, 2, 8, 2)],   # bank smaller than the batch: every set once
)
def test_sample_batch_composition(s, n_anchor, batch, want):
    cfg = LatentConfig(batch_size=batch, min_anchors=2)
    bank = _id_bank(s, n_anchor)
    for i in range(10):
        feats, lengths, anchor = sample_batch(jax.random.key(i), bank, cfg)
        sets = np.asarray(feats[:, 0, 0]).astype(int)
        slots = np.asarray(feats[:, 0, 1]).astype(int)
        assert len(sets) == min(batch, s) and len(set(sets.tolist())) == len(sets)
        assert int(anchor.sum()) == want
        np.testing.assert_array_equal(anchor, sets < n_anchor)
        assert np.all(np.asarray(lengths) > 0)
        assert not np.any((sets % 2 == 1) & (slots == 2))  # never an empty slot


SMALL = LatentConfig(
    step_hidden=(16, 16), gru_hidden=16, proj_hidden=16, t_max=12, steps=120, lr=3e-3,
    batch_size=16, min_anchors=2, min_bank_sets=8,
)


def _synthetic_bank(n_anchor: int) -> Bank:
    rng = np.random.default_rng(0)
    s, e, t, d = 24, 3, 12, 11
    base = rng.uniform(size=(s, 1, 1, d))
    f = np.clip(base + 0.05 * rng.normal(size=(s, e, t, d)), 0, 1)
    ramp = np.linspace(0.2, 1, t)[None, None, :, None]
    f = f * ramp * (1 + np.arange(s) % 3)[:, None, None, None]
    lengths = rng.integers(6, t + 1, size=(s, e))
    f = np.where(np.arange(t)[None, None, :, None] < lengths[..., None, None], f, 0)
    is_anchor = np.arange(s) < n_anchor
    return Bank(jnp.asarray(f, jnp.float32), jnp.asarray(lengths, jnp.int32),
                jnp.asarray(is_anchor))


@pytest.fixture(scope="module")
def trained():
    params = init_encoder(jax.random.key(0), SMALL)
    new, metrics = boundary_update(params, params, _synthetic_bank(8), jax.random.key(1), SMALL)
    return params, new, metrics


def test_boundary_update_decreases_the_loss(trained):
    params, new, metrics = trained
    loss = np.asarray(metrics["loss"])
    assert loss.shape == (SMALL.steps,) and np.all(np.isfinite(loss))
    assert loss[-20:].mean() < 0.75 * loss[:20].mean()
    np.testing.assert_allclose(
        loss, metrics["contrast"] + SMALL.w_distill * metrics["distill"], rtol=1e-5)
    changed = jax.tree.map(lambda a, b: bool(jnp.any(a != b)), params, new)
    assert all(jax.tree.leaves(changed))


def test_teacher_equals_student_at_step_zero(trained):
    _, _, metrics = trained
    assert bool(metrics["distill_active"][0]) and int(metrics["n_anchors"][0]) == 5
    assert abs(float(metrics["distill"][0])) < 1e-9
    assert float(metrics["distill"][-1]) > 1e-4  # the student drifted, the teacher did not


def test_distillation_off_without_enough_anchors():
    params = init_encoder(jax.random.key(0), SMALL)
    _, metrics = boundary_update(params, params, _synthetic_bank(1), jax.random.key(1), SMALL)
    assert not np.any(np.asarray(metrics["distill_active"]))
    assert np.all(np.asarray(metrics["distill"]) == 0)
    assert np.all(np.asarray(metrics["n_anchors"]) == 1)


def test_bank_checks():
    bank = _synthetic_bank(8)
    params = init_encoder(jax.random.key(0), SMALL)
    big = SMALL.model_copy(update={"min_bank_sets": 32})
    assert bank_ready(bank, SMALL) and not bank_ready(bank, big)
    with pytest.raises(ValueError, match="min_bank_sets"):
        boundary_update(params, params, bank, jax.random.key(0), big)
    bad = Bank(bank.features[..., :5], bank.lengths, bank.is_anchor)
    with pytest.raises(ValueError, match="feature_dim"):
        boundary_update(params, params, bad, jax.random.key(0), SMALL)
    with pytest.raises(ValueError, match="bank must be"):
        boundary_update(params, params, Bank(bank.features, bank.lengths[:, 0], bank.is_anchor),
                        jax.random.key(0), SMALL)
    # several banks: the one that fails is named, before any work
    few = Bank(bank.features[:5], bank.lengths[:5], bank.is_anchor[:5])
    with pytest.raises(ValueError, match="^bank 1: bank holds 5 episode sets < min_bank"):
        boundary_updates([params] * 2, [params] * 2, [bank, few], [jax.random.key(0)] * 2,
                         SMALL)
    with pytest.raises(ValueError, match="one student, teacher and key per bank"):
        boundary_updates([params], [params] * 2, [bank] * 2, [jax.random.key(0)] * 2, SMALL)


def test_a_padded_bank_gives_the_same_batches():
    """`pad_bank` appends empty sets; `sample_rows` never draws them and draws the real
    sets exactly as `sample_batch` does on the unpadded bank."""
    cfg = LatentConfig(batch_size=8, min_anchors=2)
    bank = _id_bank(10, 4)
    padded = pad_bank(bank)
    assert padded.num_sets == padded_size(10) == 64 and padded_size(65) == 128
    assert not np.any(np.asarray(padded.is_anchor[10:]))
    assert np.all(np.asarray(padded.lengths[10:]) == 0)
    for i in range(10):
        feats, lengths, anchor = sample_batch(jax.random.key(i), bank, cfg)
        sets, eps = sample_rows(jax.random.key(i), padded, 10, 8, cfg)
        assert np.all(np.asarray(sets) < 10)
        np.testing.assert_array_equal(padded.features[sets, eps], feats)
        np.testing.assert_array_equal(padded.lengths[sets, eps], lengths)


def test_boundary_update_equals_a_step_by_step_update():
    """The jitted scan (padded bank, teacher latents of the whole bank computed once)
    equals K plain steps: `sample_batch`, the teacher embedding the batch, Adam."""
    cfg = SMALL.model_copy(update={"steps": 4})
    bank = _synthetic_bank(8)
    teacher = init_encoder(jax.random.key(0), cfg)
    student = jax.tree.map(lambda a: a * 1.1, teacher)
    new, metrics = boundary_update(student, teacher, bank, jax.random.key(3), cfg)

    opt = optax.adam(cfg.lr)
    loss_and_grad = jax.jit(jax.value_and_grad(boundary_loss, has_aux=True),
                            static_argnames="config")
    params, state = student, opt.init(student)
    for k, step_key in enumerate(jax.random.split(jax.random.key(3), cfg.steps)):
        k_batch, k_views = jax.random.split(step_key)
        feats, lengths, anchor = sample_batch(k_batch, bank, cfg)
        z_teacher = jax.jit(encode)(teacher, feats, lengths)
        (loss, _), grads = loss_and_grad(params, z_teacher, feats, lengths, anchor, k_views,
                                         config=cfg)
        np.testing.assert_allclose(metrics["loss"][k], loss, rtol=1e-5)
        updates, state = opt.update(grads, state, params)
        params = optax.apply_updates(params, updates)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6),
                 new, params)
