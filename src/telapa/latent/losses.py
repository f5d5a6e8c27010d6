"""Teacher-student boundary update of the episode encoder (paper App. "Teacher--student
boundary update": "Contrastive loss", "Anchor-masked teacher distillation", "Total
boundary objective"; main text eq. embed_train_obj).

Bank layout (`Bank`, a pytree of arrays): S episode sets of up to E episodes each,

    features  (S, E, T, D) float32  per-step features, zero past each episode's length
    lengths   (S, E)       int32    valid lengths; 0 marks an empty slot (set has < E)
    is_anchor (S,)         bool     True for anchor-memory sets, False for replay sets

T is usually T_max (see `embedder.pad_or_truncate`). Every set should hold at least one
episode with length > 0 (a set with none is sampled as an empty episode).

One step: sample B = min(batch_size, S) distinct sets with
n_anc = min(A, max(max(round(anchor_fraction * B), min_anchors), B - R)) anchors (A
anchors and R replay sets in the bank), one episode uniformly per set, two views per
episode, and minimise

    L_emb = w_contrast L_contrast + w_distill L_distill

with L_distill switched on only when the batch holds >= max(min_anchors, 1) anchors.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from telapa.latent.config import LatentConfig
from telapa.latent.embedder import Params, encode
from telapa.latent.views import batch_views
from telapa.pytrees import stack

NORM_EPS = 1e-8
"""Lower bound on ||z||_2 when normalising a vector (z / max(||z||_2, NORM_EPS))."""


@struct.dataclass
class Bank:
    """Anchor + replay episode sets; see the module docstring for the layout."""

    features: jax.Array
    lengths: jax.Array
    is_anchor: jax.Array

    @property
    def num_sets(self) -> int:
        return self.is_anchor.shape[0]


def safe_norm(z: jax.Array) -> jax.Array:
    """||z||_2 on the last axis, with zero gradient (not NaN) at z = 0."""
    sq = jnp.sum(z * z, axis=-1)
    pos = sq > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, sq, 1.0)), 0.0)


def l2_normalize(z: jax.Array) -> jax.Array:
    """z / max(||z||_2, NORM_EPS) on the last axis."""
    return z / jnp.maximum(safe_norm(z), NORM_EPS)[..., None]


def info_nce(z1: jax.Array, z2: jax.Array, temperature: float) -> jax.Array:
    """Symmetric InfoNCE of two (B, d) view batches (App. "Contrastive loss"):

        s_ij = zbar1_i . zbar2_j / tau,   zbar = z / ||z||_2
        L_12 = -1/B sum_i log(exp(s_ii) / sum_j exp(s_ij))
        L_21 = -1/B sum_i log(exp(s_ii) / sum_j exp(s_ji))
        L_contrast = (L_12 + L_21) / 2
    """
    s = l2_normalize(z1) @ l2_normalize(z2).T / temperature
    l12 = -jnp.mean(jnp.diagonal(jax.nn.log_softmax(s, axis=1)))
    l21 = -jnp.mean(jnp.diagonal(jax.nn.log_softmax(s, axis=0)))
    return 0.5 * (l12 + l21)


def distillation(
    z_student: jax.Array, z_teacher: jax.Array, anchor: jax.Array, lambda_norm: float
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Anchor-masked distillation on un-augmented episodes (App. "Anchor-masked teacher
    distillation"; main-text L_distill), ``(L_distill, L_dir, L_scale)``:

        L_dir   = 1/(|I| d) sum_{i in I} ||norm(z_s,i) - norm(z_t,i)||^2
        L_scale = 1/|I| sum_{i in I} (||z_s,i|| - ||z_t,i||)^2
        L_distill = L_dir + lambda_norm L_scale

    I = {i : anchor_i}; all three are 0 when I is empty.
    """
    w = anchor.astype(jnp.float32)
    w = w / jnp.maximum(w.sum(), 1.0)
    d_dir = jnp.mean((l2_normalize(z_student) - l2_normalize(z_teacher)) ** 2, axis=-1)
    d_scale = (safe_norm(z_student) - safe_norm(z_teacher)) ** 2
    l_dir = jnp.sum(w * d_dir)
    l_scale = jnp.sum(w * d_scale)
    return l_dir + lambda_norm * l_scale, l_dir, l_scale


def batch_size(num_sets: int, config: LatentConfig) -> int:
    """B = min(batch_size, S): a batch never repeats a set."""
    return min(config.batch_size, num_sets)


def target_anchors(batch: int, config: LatentConfig) -> int:
    """Anchors wanted per batch: min(max(round_half_up(fraction * B), min_anchors), B)."""
    return min(max(int(np.floor(config.anchor_fraction * batch + 0.5)), config.min_anchors), batch)


def sample_batch(
    key: jax.Array, bank: Bank, config: LatentConfig
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """A mixed batch ``(features (B, T, D), lengths (B,), is_anchor (B,))``.

    B distinct sets, drawn uniformly without replacement within each pool: n_anc anchors
    (module docstring; fewer when the bank has fewer anchors, more when it has too few
    replay sets), the rest replay; then one episode uniformly among each set's non-empty
    slots.
    """
    sets, eps = sample_rows(key, bank, bank.num_sets, batch_size(bank.num_sets, config), config)
    return bank.features[sets, eps], bank.lengths[sets, eps], bank.is_anchor.astype(bool)[sets]


def sample_rows(
    key: jax.Array, bank: Bank, num_sets: jax.Array | int, b: int, config: LatentConfig
) -> tuple[jax.Array, jax.Array]:
    """The ``(set, episode)`` indices (B,), (B,) of `sample_batch`, for a bank whose first
    ``num_sets`` sets are real and the rest padding (never drawn; `pad_bank`).

    The sets are ordered by u_i + 2 [replay] + 4 [padding], u ~ U[0, 1)^S drawn in one
    call over all S rows: with JAX's partitionable threefry (the default) the first rows'
    u do not depend on S, so padding a bank leaves the batches of the real sets unchanged.
    """
    s = bank.num_sets
    k_sets, k_eps = jax.random.split(key)
    real = jnp.arange(s) < num_sets
    is_anchor = bank.is_anchor.astype(bool) & real
    n_avail = jnp.sum(is_anchor).astype(jnp.int32)
    n_anc = jnp.minimum(n_avail, jnp.maximum(target_anchors(b, config), b - (num_sets - n_avail)))
    # Anchors first in random order, then replay sets in random order, then padding.
    u = jax.random.uniform(k_sets, (s,))
    order = jnp.argsort(u + jnp.where(is_anchor, 0.0, 2.0) + jnp.where(real, 0.0, 4.0))
    pos = jnp.arange(b)
    sets = order[jnp.where(pos < n_anc, pos, n_avail + pos - n_anc)]

    valid = bank.lengths[sets] > 0  # (B, E)
    valid = valid | ~valid.any(-1, keepdims=True)  # an all-empty set: any slot
    # The r-th valid slot, r uniform on {0, ..., n_valid - 1}.
    n_valid = valid.sum(-1)
    r = jnp.minimum(jnp.floor(jax.random.uniform(k_eps, (b,)) * n_valid), n_valid - 1)
    eps = jnp.argmax(jnp.cumsum(valid, axis=-1) > r[:, None], axis=-1)
    return sets, eps


def padded_size(num_sets: int) -> int:
    """Rows of the padded bank: the next power of two >= ``num_sets`` (at least 64), so
    that the banks of successive boundaries share a few compiled programs."""
    return max(64, 1 << max(num_sets - 1, 0).bit_length())


def pad_bank(bank: Bank, rows: int | None = None) -> Bank:
    """``bank`` with ``rows`` sets (default `padded_size`): empty (length 0), non-anchor
    sets appended."""
    pad = (padded_size(bank.num_sets) if rows is None else rows) - bank.num_sets
    return _pad_sets(bank, pad=pad)


@partial(jax.jit, static_argnames="pad")
def _pad_sets(bank: Bank, *, pad: int) -> Bank:
    """`pad_bank`'s padding in one program (eagerly, each array's pad compiled its own)."""
    return Bank(
        features=jnp.pad(bank.features, ((0, pad), (0, 0), (0, 0), (0, 0))),
        lengths=jnp.pad(bank.lengths, ((0, pad), (0, 0))),
        is_anchor=jnp.pad(bank.is_anchor.astype(bool), (0, pad)),
    )


def boundary_loss(
    params: Params,
    z_teacher: jax.Array,
    features: jax.Array,
    lengths: jax.Array,
    is_anchor: jax.Array,
    key: jax.Array,
    config: LatentConfig,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """L_emb = w_contrast L_contrast(views) + w_distill L_distill(originals, anchors) of one
    batch (B, T, D), (B,), (B,) whose originals the frozen teacher embeds as ``z_teacher``
    (B, d); returns ``(loss, metrics)``. Gradients flow to ``params`` only."""
    b = features.shape[0]
    views, view_len = batch_views(key, features, lengths, config)
    x = jnp.concatenate([views[:, 0], views[:, 1], features.astype(jnp.float32)])
    lens = jnp.concatenate([view_len[:, 0], view_len[:, 1], lengths])
    z = encode(params, x, lens)
    z1, z2, z_student = z[:b], z[b : 2 * b], z[2 * b :]
    z_teacher = jax.lax.stop_gradient(z_teacher)

    contrast = info_nce(z1, z2, config.temperature)
    n_anchors = jnp.sum(is_anchor.astype(jnp.int32))
    active = n_anchors >= max(config.min_anchors, 1)
    distill, d_dir, d_scale = distillation(z_student, z_teacher, is_anchor, config.lambda_norm)
    distill, d_dir, d_scale = (jnp.where(active, v, 0.0) for v in (distill, d_dir, d_scale))
    loss = config.w_contrast * contrast + config.w_distill * distill
    metrics = {
        "loss": loss,
        "contrast": contrast,
        "distill": distill,
        "distill_dir": d_dir,
        "distill_scale": d_scale,
        "n_anchors": n_anchors,
        "distill_active": active,
    }
    return loss, metrics


def bank_ready(bank: Bank, config: LatentConfig) -> bool:
    """|bank| >= B_min: whether a boundary update runs (Algorithm "Online latent-space
    maintenance", step 1)."""
    return bank.num_sets >= config.min_bank_sets


def boundary_update(
    student_params: Params,
    teacher_params: Params,
    bank: Bank,
    key: jax.Array,
    config: LatentConfig,
) -> tuple[Params, dict[str, jax.Array]]:
    """K = ``config.steps`` Adam steps (lr ``config.lr``) of L_emb on fresh mixed batches,
    as one jitted `lax.scan` (batches and views drawn on the device). The bank is padded
    to `padded_size` sets first (`pad_bank`; same batches, see `sample_rows`), so
    boundaries with similar bank sizes reuse one compiled program; the frozen teacher
    embeds every bank episode once, and each step gathers its batch's teacher latents
    (the same values as embedding the batch; only float rounding can differ). Returns the
    new student parameters and per-step metrics (each (K,), evaluated before that step's
    update: ``loss``, ``contrast``, ``distill``, ``distill_dir``, ``distill_scale``,
    ``n_anchors``, ``distill_active``).

    Raises ValueError when the bank is malformed or smaller than ``min_bank_sets``
    (check `bank_ready` first to skip the update, as the paper's algorithm does).
    """
    _check_bank(bank, config)
    b = batch_size(bank.num_sets, config)
    return _boundary_update(student_params, teacher_params, pad_bank(bank),
                            jnp.int32(bank.num_sets), key, config, b)


def _check_bank(bank: Bank, config: LatentConfig) -> None:
    f, lens, anc = bank.features, bank.lengths, bank.is_anchor
    if f.ndim != 4 or lens.shape != f.shape[:2] or anc.shape != f.shape[:1]:
        raise ValueError(
            "bank must be features (S, E, T, D), lengths (S, E), is_anchor (S,); got "
            f"{f.shape}, {lens.shape}, {anc.shape}"
        )
    if f.shape[-1] != config.feature_dim:
        raise ValueError(f"bank features have D={f.shape[-1]}, config.feature_dim="
                         f"{config.feature_dim}")
    if not bank_ready(bank, config):
        raise ValueError(f"bank holds {bank.num_sets} episode sets < min_bank_sets="
                         f"{config.min_bank_sets}")


def boundary_updates(
    students: list[Params],
    teachers: list[Params],
    banks: list[Bank],
    keys: list[jax.Array],
    config: LatentConfig,
) -> list[tuple[Params, dict[str, jax.Array]]]:
    """`boundary_update` of several encoders (the seeds of a batch), each ``(students[i],
    teachers[i], banks[i], keys[i])``, as one program ``vmap``ped over them: every bank is
    padded to the largest `padded_size` among them (padding sets are never drawn, and the
    real sets' batches do not depend on the padding: `sample_rows`), so each result is
    that of `boundary_update` alone up to float rounding (the teacher's length groups hold
    other padding). Banks of different batch sizes B run as one program per B. Same
    errors as `boundary_update`, raised before any work."""
    if not (len(students) == len(teachers) == len(banks) == len(keys)) or not banks:
        raise ValueError(f"boundary_updates needs one student, teacher and key per bank; got "
                         f"{len(students)}, {len(teachers)}, {len(banks)}, {len(keys)}")
    for i, bank in enumerate(banks):
        try:
            _check_bank(bank, config)
        except ValueError as err:
            raise ValueError(f"bank {i}: {err}") from None
    rows = max(padded_size(bank.num_sets) for bank in banks)
    results: list[tuple[Params, dict[str, jax.Array]] | None] = [None] * len(banks)
    by_b: dict[int, list[int]] = {}
    for i, bank in enumerate(banks):
        by_b.setdefault(batch_size(bank.num_sets, config), []).append(i)
    for b, members in by_b.items():
        padded = stack([pad_bank(banks[i], rows) for i in members])
        params, metrics = _boundary_updates(
            stack([students[i] for i in members]), stack([teachers[i] for i in members]),
            padded, jnp.asarray([banks[i].num_sets for i in members], jnp.int32),
            jnp.stack([keys[i] for i in members]), config, b)
        for j, i in enumerate(members):
            results[i] = jax.tree.map(lambda x, j=j: x[j], (params, metrics))
    return results


@partial(jax.jit, static_argnames=("config", "b"))
def _boundary_updates(students, teachers, banks, num_sets, keys, config, b):
    return jax.vmap(partial(_boundary_update_body, config=config, b=b))(
        students, teachers, banks, num_sets, keys)


@partial(jax.jit, static_argnames=("config", "b"))
def _boundary_update(
    student_params: Params,
    teacher_params: Params,
    bank: Bank,
    num_sets: jax.Array,
    key: jax.Array,
    config: LatentConfig,
    b: int,
) -> tuple[Params, dict[str, jax.Array]]:
    return _boundary_update_body(student_params, teacher_params, bank, num_sets, key,
                                 config=config, b=b)


def _boundary_update_body(student_params: Params, teacher_params: Params, bank: Bank,
                          num_sets: jax.Array, key: jax.Array, *, config: LatentConfig,
                          b: int) -> tuple[Params, dict[str, jax.Array]]:
    opt = optax.adam(config.lr)
    grad_fn = jax.value_and_grad(boundary_loss, has_aux=True)
    z_teacher = jax.lax.stop_gradient(encode(teacher_params, bank.features, bank.lengths))
    is_anchor = bank.is_anchor.astype(bool)

    def step(carry, step_key):
        params, opt_state = carry
        k_batch, k_views = jax.random.split(step_key)
        sets, eps = sample_rows(k_batch, bank, num_sets, b, config)
        feats, lens, anchor = bank.features[sets, eps], bank.lengths[sets, eps], is_anchor[sets]
        (_, metrics), grads = grad_fn(params, z_teacher[sets, eps], feats, lens, anchor, k_views,
                                      config)
        updates, opt_state = opt.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), metrics

    init = (student_params, opt.init(student_params))
    (params, _), metrics = jax.lax.scan(step, init, jax.random.split(key, config.steps))
    return params, metrics
