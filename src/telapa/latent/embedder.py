"""Episode encoder phi and policy-level latent summaries (paper App. "Episode encoder
architecture" and "Policy-level latent summaries").

An episode is a zero-padded array ``features`` of shape (..., T, D) with its valid length
``lengths`` of shape (...): steps ``t >= length`` are padding and never affect any output
(they are zeroed before the encoder sees them). Per step

    h_t^(0) = relu(W_2 relu(W_1 f_t + b_1) + b_2)        (per-step MLP)
    h_t     = GRU(h_{t-1}, h_t^(0)),  h_0 = 0             (temporal aggregation)
    z_e     = W_4 relu(W_3 h_E + b_3) + b_4,  h_E = h_l   (projection, l = valid length)

An episode of length 0 has ``h_E = h_0 = 0``. The per-timestep projections used by the
within-episode temporal std are ``z_t = Proj(h_t)`` for ``t = 1..l`` (so ``z_l = z_e``).
The GRU is Flax's ``GRUCell`` (x = h_t^(0), h = h_{t-1}, sigma the logistic function):

    r = sigma(W_ir x + b_ir + W_hr h),  z = sigma(W_iz x + b_iz + W_hz h)
    n = tanh(W_in x + b_in + r (W_hn h + b_hn)),  h_t = (1 - z) n + z h

**Cost.** Per episode step the forward pass costs 4,800 (MLP) + 12,288 (input side of the
gates) + 12,288 (recurrent side) multiply-adds, 59 kFLOP (+9 kFLOP for z_t). `encode`
spends it on valid steps only (rounded up to blocks of `BLOCK` within length groups of
`GROUP` episodes), not on the padding up to T_max: with MiniGrid episodes of ~35 steps
in T_max = 256 that is most of the work of a full-length pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from telapa.latent.config import LatentConfig

Params = Any
"""A parameter pytree (nested dict of arrays)."""


def valid_mask(lengths: jax.Array, t: int) -> jax.Array:
    """(..., T) bool: ``mask[..., s] = s < lengths[...]``."""
    return jnp.arange(t) < jnp.asarray(lengths)[..., None]


class EpisodeEncoder(nn.Module):
    """phi: (..., T, D) episodes with (...) valid lengths -> (..., d) latents.

    The module owns the parameter layout (Flax initialisers, names ``step_1``, ``step_2``,
    ``gru/cell/{ir,iz,in,hr,hz,hn}``, ``proj_1``, ``proj_2``); the forward pass is the
    pure function `encode` on those parameters."""

    latent_dim: int = 8
    step_hidden: tuple[int, int] = (64, 64)
    gru_hidden: int = 64
    proj_hidden: int = 64

    def setup(self) -> None:
        self.step_1 = nn.Dense(self.step_hidden[0])
        self.step_2 = nn.Dense(self.step_hidden[1])
        self.gru = nn.RNN(nn.GRUCell(self.gru_hidden))
        self.proj_1 = nn.Dense(self.proj_hidden)
        self.proj_2 = nn.Dense(self.latent_dim)

    def _create_params(self, features: jax.Array) -> None:
        """Init only: one pass through every layer creates its parameters."""
        h = self.gru(nn.relu(self.step_2(nn.relu(self.step_1(features.astype(jnp.float32))))))
        self.proj_2(nn.relu(self.proj_1(h)))

    def __call__(self, features: jax.Array, lengths: jax.Array) -> jax.Array:
        """z_e = Proj(h_E), (..., d) (`encode`)."""
        if self.is_initializing():
            self._create_params(features)
        return encode(self.variables, features, lengths)

    def encode_steps(self, features: jax.Array, lengths: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(z_e, z_steps)``: (..., d) and per-step projections (..., T, d), zero past l
        (`encode` with ``steps=True``)."""
        if self.is_initializing():
            self._create_params(features)
        return encode(self.variables, features, lengths, steps=True)


# --- the forward pass -------------------------------------------------------------------

GROUP = 32
"""Episodes per length group in `encode` (the GRU's batch in one recurrent step)."""
BLOCK = 8
"""Time steps per block in `encode` (the unit of work that is skipped or run)."""


class _Weights(NamedTuple):
    w1: jax.Array
    b1: jax.Array
    w2: jax.Array
    b2: jax.Array
    wi: jax.Array
    """(H_0, 3H): input kernels of the reset, update and candidate gates side by side."""
    bi: jax.Array
    wh: jax.Array
    """(H, 3H): recurrent kernels, same order."""
    bhn: jax.Array
    w3: jax.Array
    b3: jax.Array
    w4: jax.Array
    b4: jax.Array


def _weights(params: Params) -> _Weights:
    p = params["params"]
    cell = p["gru"]["cell"]
    return _Weights(
        p["step_1"]["kernel"], p["step_1"]["bias"], p["step_2"]["kernel"], p["step_2"]["bias"],
        jnp.concatenate([cell[g]["kernel"] for g in ("ir", "iz", "in")], axis=1),
        jnp.concatenate([cell[g]["bias"] for g in ("ir", "iz", "in")]),
        jnp.concatenate([cell[g]["kernel"] for g in ("hr", "hz", "hn")], axis=1),
        cell["hn"]["bias"],
        p["proj_1"]["kernel"], p["proj_1"]["bias"], p["proj_2"]["kernel"], p["proj_2"]["bias"],
    )


def _project(w: _Weights, h: jax.Array) -> jax.Array:
    """Proj(h) = W_4 relu(W_3 h + b_3) + b_4."""
    return nn.relu(h @ w.w3 + w.b3) @ w.w4 + w.b4


def _block_inputs(
    w: _Weights, x: jax.Array, valid: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Per-step MLP and the input side of the gates for a block (g, k, D) at once:
    ``(x_masked, u_1, u_2, gi)`` with u_1 = W_1 f + b_1, u_2 = W_2 relu(u_1) + b_2,
    h^(0) = relu(u_2) and gi = [W_ir; W_iz; W_in] h^(0) + [b_ir; b_iz; b_in] (g, k, 3H)."""
    xm = jnp.where(valid[..., None], x, 0.0)
    u1 = xm @ w.w1 + w.b1
    u2 = nn.relu(u1) @ w.w2 + w.b2
    return xm, u1, u2, nn.relu(u2) @ w.wi + w.bi


def _gates(
    w: _Weights, gi: jax.Array, gh: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """``(r, z, n, W_hn h + b_hn)`` of the GRU cell from gi and gh = [W_hr; W_hz; W_hn] h."""
    hid = w.wh.shape[0]
    r = nn.sigmoid(gi[..., :hid] + gh[..., :hid])
    z = nn.sigmoid(gi[..., hid : 2 * hid] + gh[..., hid : 2 * hid])
    ghn = gh[..., 2 * hid :] + w.bhn
    return r, z, jnp.tanh(gi[..., 2 * hid :] + r * ghn), ghn


def _recur(
    w: _Weights, gi: jax.Array, valid: jax.Array, h: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """The k steps of a block from h: ``(h_last (g, H), h_1..h_k (g, k, H))``; h changes
    only on valid steps."""
    hs = []
    for s in range(gi.shape[1]):
        r, z, n, _ = _gates(w, gi[:, s], h @ w.wh)
        h = jnp.where(valid[:, s, None], (1.0 - z) * n + z * h, h)
        hs.append(h)
    return h, jnp.stack(hs, 1)


def _blocks(x: jax.Array, lengths: jax.Array, block: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(starts (nb,), blocks (nb, g, k, D), longest ())`` of a group (g, T, D)."""
    g, t, dim = x.shape
    n_blocks = t // block
    xb = x.reshape(g, n_blocks, block, dim).swapaxes(0, 1)
    return jnp.arange(n_blocks) * block, xb, jnp.max(lengths)


def _valid(start: jax.Array, lengths: jax.Array, block: int) -> jax.Array:
    return start + jnp.arange(block) < lengths[:, None]


def _forward(
    w: _Weights, x: jax.Array, lengths: jax.Array, block: int, emit: Callable
) -> tuple[jax.Array, Any]:
    """One group of g episodes (g, T, D), T a multiple of ``block``: the final states h_l
    (g, H) and, per block, ``emit(h_1..h_k (g, k, H), valid (g, k))`` stacked (nb, ...).

    Time runs in blocks of ``block`` steps; a block starting at or past the group's
    longest length is skipped (it is padding for every episode in the group; it emits
    zeros)."""
    g = x.shape[0]
    hid = w.wh.shape[0]
    starts, xb, longest = _blocks(x, lengths, block)
    out = jax.eval_shape(emit, jax.ShapeDtypeStruct((g, block, hid), jnp.float32),
                         jax.ShapeDtypeStruct((g, block), jnp.bool_))

    def body(h: jax.Array, inp: tuple[jax.Array, jax.Array]):
        start, xj = inp
        valid = _valid(start, lengths, block)

        def run(h: jax.Array):
            h, hs = _recur(w, _block_inputs(w, xj, valid)[3], valid, h)
            return h, emit(hs, valid)

        def skip(h: jax.Array):
            return h, jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), out)

        return jax.lax.cond(start < longest, run, skip, h)

    return jax.lax.scan(body, jnp.zeros((g, hid), jnp.float32), (starts, xb))


@partial(jax.custom_vjp, nondiff_argnums=(3,))
def _final_state(w: _Weights, x: jax.Array, lengths: jax.Array, block: int) -> jax.Array:
    """h_l (g, H) of a group (`_forward`), with a hand-written reverse pass (`_final_bwd`)."""
    return _forward(w, x, lengths, block, lambda hs, valid: None)[0]


def _final_fwd(w: _Weights, x: jax.Array, lengths: jax.Array, block: int):
    h, hs = _forward(w, x, lengths, block, lambda hs, valid: hs)
    return h, (w, x, lengths, hs)


def _final_bwd(block: int, res: tuple, dh: jax.Array):
    """Backpropagation through time over the same blocks, last to first, skipping the
    same padding blocks. Per valid step, with a = h_{t-1}, n_pre = gi_n + r (W_hn a + b_hn):

        dn = dh (1 - z),  dz = dh (a - n),  dn_pre = dn (1 - n^2),
        dr_pre = dn_pre (W_hn a + b_hn) r (1 - r),  dz_pre = dz z (1 - z),
        dgi = [dr_pre, dz_pre, dn_pre],  dgh = [dr_pre, dz_pre, dn_pre r],
        dh_{t-1} = dh z + dgh [W_hr; W_hz; W_hn]^T          (dh_{t-1} = dh on padding)

    Only dh is sequential: the gate activations are recomputed for the whole block from
    the saved states, and the weight gradients are one matmul per block (sum over the
    block's episodes and steps), e.g. dW_h = sum_t h_{t-1}^T dgh_t."""
    w, x, lengths, hs = res
    g, hid = dh.shape
    starts, xb, longest = _blocks(x, lengths, block)
    h_before = jnp.concatenate([jnp.zeros((1, g, hid), hs.dtype), hs[:-1, :, -1]])
    trained = (w.w1, w.b1, w.w2, w.b2, w.wi, w.bi, w.wh, w.bhn)

    def flat(a: jax.Array) -> jax.Array:
        return a.reshape(-1, a.shape[-1])

    def body(carry, inp):
        start, xj, hsj, h0 = inp
        valid = _valid(start, lengths, block)

        def run(dh: jax.Array, acc: tuple):
            xm, u1, u2, gi = _block_inputs(w, xj, valid)
            prev = jnp.concatenate([h0[:, None], hsj[:, :-1]], 1)  # h_{t-1} (g, k, H)
            r, z, n, ghn = _gates(w, gi, prev @ w.wh)
            dgis, dghs = [], []
            for s in reversed(range(block)):
                v = valid[:, s, None]
                dn_pre = dh * (1.0 - z[:, s]) * (1.0 - n[:, s] ** 2)
                dz_pre = dh * (prev[:, s] - n[:, s]) * z[:, s] * (1.0 - z[:, s])
                dr_pre = dn_pre * ghn[:, s] * r[:, s] * (1.0 - r[:, s])
                dgi = jnp.where(v, jnp.concatenate([dr_pre, dz_pre, dn_pre], -1), 0.0)
                dgh = jnp.where(v, jnp.concatenate([dr_pre, dz_pre, dn_pre * r[:, s]], -1), 0.0)
                dh = jnp.where(v, dh * z[:, s] + dgh @ w.wh.T, dh)
                dgis.append(dgi)
                dghs.append(dgh)
            dgi, dgh = jnp.stack(dgis[::-1], 1), jnp.stack(dghs[::-1], 1)
            du2 = (dgi @ w.wi.T) * (u2 > 0)
            du1 = (du2 @ w.w2.T) * (u1 > 0)
            grads = (
                flat(xm).T @ flat(du1), du1.sum((0, 1)),
                flat(nn.relu(u1)).T @ flat(du2), du2.sum((0, 1)),
                flat(nn.relu(u2)).T @ flat(dgi), dgi.sum((0, 1)),
                flat(prev).T @ flat(dgh), dgh[..., 2 * hid :].sum((0, 1)),
            )
            return dh, tuple(a + b for a, b in zip(acc, grads, strict=True))

        return jax.lax.cond(start < longest, run, lambda dh, acc: (dh, acc), *carry), None

    acc = tuple(jnp.zeros_like(p) for p in trained)
    (_, acc), _ = jax.lax.scan(body, (dh, acc), (starts, xb, hs, h_before), reverse=True)
    zero = jax.tree.map(jnp.zeros_like, w)
    dw = zero._replace(w1=acc[0], b1=acc[1], w2=acc[2], b2=acc[3], wi=acc[4], bi=acc[5],
                       wh=acc[6], bhn=acc[7])
    return dw, None, None


_final_state.defvjp(_final_fwd, _final_bwd)


def encode(
    params: Params,
    features: jax.Array,
    lengths: jax.Array,
    *,
    steps: bool = False,
    group: int = GROUP,
    block: int = BLOCK,
):
    """The encoder's forward pass (module docstring) on (..., T, D) episodes with (...)
    lengths: z_e (..., d), and with ``steps`` also z_t (..., T, d) (zero past l).

    Work follows the valid lengths, not T: the episodes are sorted by length and cut into
    groups of ``group``; each group runs the recurrence in blocks of ``block`` steps up to
    its own longest episode (`_forward`), and the results are put back in input order.
    Steps past an episode's length do not enter any output (the GRU state is frozen at
    h_l and inputs there are zeroed first), so the result equals running every episode
    over all T steps and taking h_l; only float rounding differs (matmul shapes differ).
    z_e is differentiable in ``params`` (reverse pass `_final_bwd`, which skips the same
    blocks); the ``steps`` output is for evaluation (it differentiates through JAX's
    generic rules, correctly but without the skipping).
    """
    w = _weights(params)
    hid, latent = w.wh.shape[0], w.w4.shape[1]
    features = jnp.asarray(features)
    lead, (t, dim) = features.shape[:-2], features.shape[-2:]
    lengths = jnp.broadcast_to(jnp.asarray(lengths, jnp.int32), lead)
    x = features.reshape(-1, t, dim).astype(jnp.float32)
    lens = jnp.clip(lengths.reshape(-1), 0, t)
    n = x.shape[0]
    g = max(1, min(group, n))
    n_groups = -(-n // g)
    t_pad = -(-t // block) * block
    order = jnp.argsort(lens)
    x = jnp.pad(x[order], ((0, n_groups * g - n), (0, t_pad - t), (0, 0)))
    lens = jnp.pad(lens[order], (0, n_groups * g - n))
    groups = (x.reshape(n_groups, g, t_pad, dim), lens.reshape(n_groups, g))
    back = jnp.argsort(order)
    if not steps:
        h = jax.lax.map(lambda a: _final_state(w, a[0], a[1], block), groups)
        return _project(w, h.reshape(n_groups * g, hid)[back]).reshape(*lead, latent)

    def emit(hs: jax.Array, valid: jax.Array) -> jax.Array:
        return jnp.where(valid[..., None], _project(w, hs), 0.0)

    def run(a: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        h, zs = _forward(w, a[0], a[1], block, emit)  # zs (nb, g, k, d)
        return h, zs.swapaxes(0, 1).reshape(g, t_pad, latent)

    h, zs = jax.lax.map(run, groups)
    z_e = _project(w, h.reshape(n_groups * g, hid)[back]).reshape(*lead, latent)
    return z_e, zs.reshape(n_groups * g, t_pad, latent)[back, :t].reshape(*lead, t, latent)


def make_encoder(config: LatentConfig) -> EpisodeEncoder:
    """The encoder with ``config``'s widths."""
    return EpisodeEncoder(
        latent_dim=config.latent_dim,
        step_hidden=tuple(config.step_hidden),
        gru_hidden=config.gru_hidden,
        proj_hidden=config.proj_hidden,
    )


@partial(jax.jit, static_argnames="config")
def init_encoder(key: jax.Array, config: LatentConfig) -> Params:
    """Fresh encoder parameters (Flax default initialisers). Compiled: the same values as
    op by op, which took 5.6 s against 1.9 s in a new process (2-core CPU)."""
    dummy = jnp.zeros((1, 2, config.feature_dim), jnp.float32)
    return make_encoder(config).init(key, dummy, jnp.array([2]))


@partial(jax.jit, static_argnames="config")
def embed_episodes(
    params: Params, features: jax.Array, lengths: jax.Array, config: LatentConfig
) -> jax.Array:
    """z_e = phi(E) for (..., T, D) episodes with (...) lengths -> (..., d)."""
    return make_encoder(config).apply(params, features, lengths)


# --- padding ----------------------------------------------------------------------------


def pad_or_truncate(
    features: jax.Array, lengths: jax.Array, t_max: int = 256
) -> tuple[jax.Array, jax.Array]:
    """(..., T, D), (...) -> (..., t_max, D), (...): keep the first ``t_max`` steps or pad
    with zeros; lengths become ``min(l, t_max)`` and steps past them are zeroed."""
    t = features.shape[-2]
    if t >= t_max:
        features = features[..., :t_max, :]
    else:
        pad = [(0, 0)] * (features.ndim - 2) + [(0, t_max - t), (0, 0)]
        features = jnp.pad(features, pad)
    lengths = jnp.minimum(jnp.asarray(lengths, jnp.int32), t_max)
    mask = valid_mask(lengths, t_max)
    return jnp.where(mask[..., None], features, 0).astype(jnp.float32), lengths


def pad_episodes(
    episodes: Sequence[np.ndarray], t_max: int = 256, feature_dim: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """A list of (T_i, D) episodes -> zero-padded (N, t_max, D) float32 and (N,) int32
    lengths ``min(T_i, t_max)`` (the first ``t_max`` steps are kept)."""
    dims = {np.shape(e)[1] for e in episodes if np.ndim(e) == 2}
    if feature_dim is None:
        if len(dims) != 1:
            raise ValueError(f"episodes must be (T, D) arrays with one D; got D in {dims}")
        feature_dim = dims.pop()
    out = np.zeros((len(episodes), t_max, feature_dim), np.float32)
    lengths = np.zeros(len(episodes), np.int32)
    for i, e in enumerate(episodes):
        e = np.asarray(e, np.float32).reshape(-1, feature_dim)[:t_max]
        out[i, : len(e)] = e
        lengths[i] = len(e)
    return out, lengths


# --- policy-level summaries -------------------------------------------------------------


class LatentSummary(NamedTuple):
    """Raw policy-level latent summary (z_mean, z_std_ep, z_std_time), each (..., d)."""

    z_mean: jax.Array
    z_std_ep: jax.Array
    z_std_time: jax.Array

    @property
    def raw(self) -> jax.Array:
        """(..., 3d): ``[z_mean, z_std_ep, z_std_time]`` concatenated in that order."""
        return jnp.concatenate([self.z_mean, self.z_std_ep, self.z_std_time], axis=-1)


def summarize(z_episodes: jax.Array, z_steps: jax.Array, lengths: jax.Array) -> LatentSummary:
    """Policy summary from M episode latents (M, d) and per-step projections (M, T, d).

        z_mean     = 1/M sum_m z_e^(m)
        z_std_ep   = sqrt(1/M sum_m (z_e^(m) - z_mean)^2)                 (element-wise)
        s_time^(m) = sqrt(1/T_m sum_t (z_t^(m) - zbar^(m))^2),  zbar^(m) = 1/T_m sum_t z_t^(m)
        z_std_time = 1/M sum_m s_time^(m)

    Episodes with ``length == 0`` are absent slots and are left out of M; with no episode
    at all every entry is NaN (such sets are discarded by `normalizer.fit`).
    """
    lengths = jnp.asarray(lengths)
    present = (lengths > 0).astype(jnp.float32)  # (M,)
    m = present.sum()
    z_mean = (present[:, None] * z_episodes).sum(0) / m
    z_std_ep = jnp.sqrt((present[:, None] * (z_episodes - z_mean) ** 2).sum(0) / m)

    step_mask = valid_mask(lengths, z_steps.shape[-2]).astype(jnp.float32)[..., None]
    t_m = jnp.maximum(lengths, 1).astype(jnp.float32)[:, None]  # (M, 1)
    z_bar = (step_mask * z_steps).sum(1) / t_m  # (M, d)
    s_time = jnp.sqrt((step_mask * (z_steps - z_bar[:, None]) ** 2).sum(1) / t_m)
    z_std_time = (present[:, None] * s_time).sum(0) / m
    return LatentSummary(z_mean, z_std_ep, z_std_time)


@partial(jax.jit, static_argnames="config")
def policy_summary(
    params: Params, features: jax.Array, lengths: jax.Array, config: LatentConfig
) -> LatentSummary:
    """Raw latent summary of one policy from its M evaluation episodes (M, T, D), (M,),
    or of many at once: (..., M, T, D), (..., M) -> fields (..., d).

    Pass many policies through the leading axes rather than `jax.vmap`: `encode` then
    sorts all their episodes by length together and skips the padding (under vmap its
    skipping becomes a select and every step is computed; the result is the same).
    """
    features = jnp.asarray(features)
    lengths = jnp.broadcast_to(jnp.asarray(lengths, jnp.int32), features.shape[:-2])
    z_e, z_steps = encode(params, features, lengths, steps=True)
    fn = summarize
    for _ in range(features.ndim - 3):
        fn = jax.vmap(fn)
    return fn(z_e, z_steps, lengths)
