"""Actor-critic networks (Flax linen) and flat parameter vectors.

Observations are dicts of arrays (`telapa.envs.Obs`); the encoder is built from the env
spec's `ArraySpec`s, with nothing family-specific here. An entry of integer codes (its
spec has ``levels``) of rank <= 1 (MiniGrid's ``direction`` and ``mission``) becomes
one-hots of its level counts (code -1 gives zeros); a grid of codes (rank >= 2, MiniGrid's
``image``) is fed as the network config's ``grid_codes`` says (raw codes, codes scaled to
[0, 1], or one-hots), or through the rl-starter-files / BabyAI conv stack
(``encoder="cnn"``, rank-3 grids); any other entry is flattened as float. Actor and critic
are separate MLP towers on top (SB3's MlpPolicy when the encoder is flat).

``activation="dff"`` is Deep Fourier Features (Lewandowski et al. 2024): every unit
outputs ``[sin(z), cos(z)]`` of its pre-activation ``z``, doubling the layer's width.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from telapa.config import NetworkConfig
from telapa.envs.base import ArraySpec, EnvSpec, Obs

Params = Any
"""A parameter pytree (nested dict of arrays)."""

# Cody-Waite split of pi/2 (the leading parts have few significant bits, so q * part is
# exact in float32 for the quadrants of |z| < 1e5) and the minimax polynomials of Cephes'
# sinf/cosf on [-pi/4, pi/4].
_PIO2 = (1.5703125, 4.837512969970703125e-4, 7.54978995489188216e-8)
_SIN = (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)
_COS = (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2)


@jax.custom_jvp
def sincos(z: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(sin z, cos z)`` in float32 from element-wise arithmetic only, so XLA vectorizes it
    (XLA's CPU ``sin`` and ``cos`` call a scalar routine per element: 30x the time of
    ``tanh``, BENCHMARKS.md "Activations").

    With the quadrant ``q = round(2 z / pi)`` and ``r = z - q pi/2`` in [-pi/4, pi/4]
    (pi/2 in three parts, so ``r`` keeps float32 accuracy):

        s(r) = r + r^3 (c1 + c2 r^2 + c3 r^4),  c(r) = 1 - r^2/2 + r^4 (d1 + d2 r^2 + d3 r^4)
        (_SIN = (c3, c2, c1) and _COS = (d3, d2, d1), Horner order)
        (sin z, cos z) = (s, c), (c, -s), (-s, -c), (-c, s)   for q mod 4 = 0, 1, 2, 3.

    Absolute error below 1e-7 for |z| < 1e5 (XLA's: 3e-8; tests/rl/test_networks.py). The
    derivative is the identity d(sin z, cos z) = (cos z, -sin z) dz on the computed
    values."""
    z = jnp.asarray(z, jnp.float32)
    q = jnp.round(z * np.float32(2 / np.pi))
    r = ((z - q * np.float32(_PIO2[0])) - q * np.float32(_PIO2[1])) - q * np.float32(_PIO2[2])
    r2 = r * r
    s = r + r * r2 * ((np.float32(_SIN[0]) * r2 + np.float32(_SIN[1])) * r2
                      + np.float32(_SIN[2]))
    c = (np.float32(1) - np.float32(0.5) * r2
         + r2 * r2 * ((np.float32(_COS[0]) * r2 + np.float32(_COS[1])) * r2
                      + np.float32(_COS[2])))
    quadrant = q.astype(jnp.int32) & 3
    swap = (quadrant & 1) == 1
    sin = jnp.where(swap, c, s)
    cos = jnp.where(swap, s, c)
    sin = jnp.where(quadrant >= 2, -sin, sin)
    cos = jnp.where((quadrant == 1) | (quadrant == 2), -cos, cos)
    return sin, cos


@sincos.defjvp
def _sincos_jvp(primals: tuple[jax.Array], tangents: tuple[jax.Array]
                ) -> tuple[tuple[jax.Array, jax.Array], tuple[jax.Array, jax.Array]]:
    sin, cos = sincos(primals[0])
    dz = jnp.asarray(tangents[0], jnp.float32)
    return (sin, cos), (cos * dz, -sin * dz)


def dff(z: jax.Array) -> jax.Array:
    """Deep Fourier Features: ``[sin(z), cos(z)]`` along the feature axis (`sincos`)."""
    sin, cos = sincos(z)
    return jnp.concatenate([sin, cos], axis=-1)


ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "tanh": jnp.tanh,
    "relu": nn.relu,
    "dff": dff,
}


def _dense(features: int, scale: float) -> nn.Dense:
    return nn.Dense(
        features, kernel_init=nn.initializers.orthogonal(scale), bias_init=nn.initializers.zeros
    )


class MLP(nn.Module):
    hidden: Sequence[int]
    activation: str

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        for width in self.hidden:
            x = act(_dense(width, np.sqrt(2.0))(x))
        return x


def _patches_2x2(x: jax.Array) -> jax.Array:
    """(..., H, W, C) -> (..., H-1, W-1, 4C): the inputs of a 2x2 'VALID' convolution."""
    return jnp.concatenate(
        [x[..., :-1, :-1, :], x[..., :-1, 1:, :], x[..., 1:, :-1, :], x[..., 1:, 1:, :]], axis=-1
    )


def _max_pool_2x2(x: jax.Array) -> jax.Array:
    """Non-overlapping 2x2 max pooling of (..., H, W, C), H and W even."""
    *batch, h, w, c = x.shape
    return x.reshape(*batch, h // 2, 2, w // 2, 2, c).max(axis=(-4, -2))


class MiniGridCNN(nn.Module):
    """Conv(16,2x2)-act-MaxPool(2)-Conv(32,2x2)-act-Conv(64,2x2)-act: 7x7x3 -> 64
    (rl-starter-files / BabyAI). Each 2x2 convolution is a dense layer on 2x2 patches:
    the same function, but much faster than XLA's CPU convolutions in the backward pass.
    """

    activation: str

    @nn.compact
    def __call__(self, image: jax.Array) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        x = act(_dense(16, np.sqrt(2.0))(_patches_2x2(image)))  # 6x6
        x = _max_pool_2x2(x)  # 3x3
        x = act(_dense(32, np.sqrt(2.0))(_patches_2x2(x)))  # 2x2
        x = act(_dense(64, np.sqrt(2.0))(_patches_2x2(x)))  # 1x1
        return x.reshape(x.shape[:-3] + (-1,))


def one_hot_codes(x: jax.Array, levels: Sequence[int]) -> jax.Array:
    """``x`` (..., len(levels)) of codes -> the concatenated one-hots of each last-axis
    element, ``sum(levels)`` wide; a code of -1 gives zeros (`jax.nn.one_hot`)."""
    return jnp.concatenate(
        [jax.nn.one_hot(x[..., i], n) for i, n in enumerate(levels)], axis=-1
    )


class Encoder(nn.Module):
    """Observation dict -> feature vector.

    ``obs_spec`` holds ``(name, shape, levels)`` per entry (`ArraySpec`). With ``x`` an
    entry and ``L`` its levels along the last axis:

    - codes of rank <= 1: ``one_hot(x_i, L_i)`` concatenated over ``i``;
    - a grid of codes (rank >= 2): ``grid_codes="raw"``: ``x`` as float;
      ``"unit"``: ``x_i / (L_i - 1)`` in [0, 1]; ``"onehot"``: as rank <= 1; or the conv
      stack for a rank-3 grid when ``kind="cnn"`` (raw codes, as rl-starter-files);
    - real values: ``x`` as float;

    each flattened over its own axes, concatenated in ``obs_spec`` order."""

    obs_spec: tuple[tuple[str, tuple[int, ...], tuple[int, ...] | None], ...]
    kind: str
    activation: str
    grid_codes: str = "raw"

    @nn.compact
    def __call__(self, obs: Obs) -> jax.Array:
        parts = []
        for name, shape, levels in self.obs_spec:
            x = obs[name]
            batch = x.shape[: x.ndim - len(shape)]
            grid = len(shape) >= 2
            if grid and self.kind == "cnn" and len(shape) == 3:
                x = MiniGridCNN(self.activation)(x.astype(jnp.float32))
            elif levels is not None and (not grid or self.grid_codes == "onehot"):
                x = one_hot_codes(x[..., None] if not shape else x, levels)
            elif levels is not None and self.grid_codes == "unit":
                top = np.maximum(np.asarray(levels, np.float32) - 1, 1)
                x = x.astype(jnp.float32) / top
            parts.append(x.reshape(batch + (-1,)).astype(jnp.float32))
        return jnp.concatenate(parts, axis=-1)


class ActorCritic(nn.Module):
    """Returns ``(policy_out, value)``: logits (discrete) or the Gaussian mean, and V(s).

    For continuous actions a state-independent ``log_std`` parameter (init 0) is kept.
    """

    obs_spec: tuple[tuple[str, tuple[int, ...], tuple[int, ...] | None], ...]
    n_out: int
    continuous: bool
    encoder: str = "flat"
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    grid_codes: str = "raw"

    @nn.compact
    def __call__(self, obs: Obs) -> tuple[jax.Array, jax.Array]:
        feats = Encoder(self.obs_spec, self.encoder, self.activation, self.grid_codes,
                        name="encoder")(obs)
        actor = MLP(self.hidden, self.activation, name="actor")(feats)
        policy_out = _dense(self.n_out, 0.01)(actor)
        critic = MLP(self.hidden, self.activation, name="critic")(feats)
        value = _dense(1, 1.0)(critic)[..., 0]
        if self.continuous:
            self.param("log_std", nn.initializers.zeros, (self.n_out,))
        return policy_out, value


def make_network(spec: EnvSpec, config: NetworkConfig) -> ActorCritic:
    """The actor-critic for ``spec``'s observations and actions."""
    if config.encoder == "cnn" and not any(len(s.shape) == 3
                                           for s in spec.observation.values()):
        raise ValueError(f"encoder='cnn' needs a grid observation (rank 3); {spec.env_id} "
                         f"has {({k: s.shape for k, s in spec.observation.items()})}")
    obs_spec = tuple((k, tuple(s.shape), s.levels)
                     for k, s in sorted(spec.observation.items()))
    return ActorCritic(
        obs_spec=obs_spec,
        n_out=spec.n_actions if spec.discrete else spec.action_dim,
        continuous=not spec.discrete,
        encoder=config.encoder,
        hidden=tuple(config.hidden),
        activation=config.activation,
        grid_codes=config.grid_codes,
    )


def dummy_obs(observation: dict[str, ArraySpec]) -> Obs:
    """A zero observation (no batch dims) for initialising parameters."""
    return {k: jnp.zeros(s.shape, s.dtype) for k, s in observation.items()}


def flatten_params(params: Params) -> tuple[jax.Array, Callable[[jax.Array], Params]]:
    """``(vector, unravel)`` with ``unravel(vector)`` rebuilding the pytree (vmappable)."""
    return ravel_pytree(params)


def num_params(params: Params) -> int:
    return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(params))
