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
"""

from __future__ import annotations

from collections.abc import Sequence
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
    """phi: (..., T, D) episodes with (...) valid lengths -> (..., d) latents."""

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

    def hidden_states(self, features: jax.Array, lengths: jax.Array) -> jax.Array:
        """(..., T, H): GRU states h_1..h_T; only ``t < length`` are meaningful."""
        mask = valid_mask(lengths, features.shape[-2])
        x = jnp.where(mask[..., None], features.astype(jnp.float32), 0.0)
        x = nn.relu(self.step_2(nn.relu(self.step_1(x))))
        return self.gru(x)

    def project(self, h: jax.Array) -> jax.Array:
        """Proj(h) = W_4 relu(W_3 h + b_3) + b_4."""
        return self.proj_2(nn.relu(self.proj_1(h)))

    def final_state(self, features: jax.Array, lengths: jax.Array) -> jax.Array:
        """h_E = h_l (zeros when l = 0)."""
        h = self.hidden_states(features, lengths)
        lengths = jnp.asarray(lengths)
        idx = jnp.clip(lengths - 1, 0, h.shape[-2] - 1)[..., None, None]
        last = jnp.take_along_axis(h, idx, axis=-2)[..., 0, :]
        return jnp.where((lengths > 0)[..., None], last, 0.0)

    def __call__(self, features: jax.Array, lengths: jax.Array) -> jax.Array:
        """z_e = Proj(h_E), (..., d)."""
        return self.project(self.final_state(features, lengths))

    def encode_steps(self, features: jax.Array, lengths: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(z_e, z_steps)``: (..., d) and per-step projections (..., T, d), zero past l."""
        z_e = self(features, lengths)
        z_steps = self.project(self.hidden_states(features, lengths))
        mask = valid_mask(lengths, features.shape[-2])
        return z_e, jnp.where(mask[..., None], z_steps, 0.0)


def make_encoder(config: LatentConfig) -> EpisodeEncoder:
    """The encoder with ``config``'s widths."""
    return EpisodeEncoder(
        latent_dim=config.latent_dim,
        step_hidden=tuple(config.step_hidden),
        gru_hidden=config.gru_hidden,
        proj_hidden=config.proj_hidden,
    )


def init_encoder(key: jax.Array, config: LatentConfig) -> Params:
    """Fresh encoder parameters (Flax default initialisers)."""
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
    """Raw latent summary of one policy from its M evaluation episodes (M, T, D), (M,).

    vmap over a leading axis for many policies (or episode sets) at once.
    """
    z_e, z_steps = make_encoder(config).apply(
        params, features, lengths, method=EpisodeEncoder.encode_steps
    )
    return summarize(z_e, z_steps, lengths)
