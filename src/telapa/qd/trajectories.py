"""Stored evaluation episodes of archived elites (what re-embedding reads, paper App.
"Online latent-space maintenance").

The evaluation episodes of each elite (m episodes, first T steps of
behaviour features, zero-padded, with lengths) live in a separate `Trajectories` block,
``archive.traj``, that `drop_trajectories` removes. Features that are exact multiples of
1/k (MiniGrid: x/(W-1), y/(H-1), dir/3, step/max_steps, action/6, flags) are stored as
integer numerators, uint8 when k <= 255 else uint16, and decode bit-identically to the
float32 features of `telapa.envs.minigrid.features`; features without a denominator
(MuJoCo) are stored as float16, which is lossy (about 3 significant digits). Each env
family says how its features are stored (``EnvFamily.codec``, e.g.
`telapa.envs.minigrid.features.minigrid_codec`).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct


@dataclasses.dataclass(frozen=True)
class FeatureCodec:
    """How each of the D per-step features is stored.

    ``denominators[j] = k`` (an int, 1 <= k <= 65535) declares that feature j is always
    ``float32(n) * (float32(1) / float32(k))`` for an integer 0 <= n <= k: it is stored
    as the numerator n (uint8 if k <= 255, else uint16) and decodes bit-identically.
    ``None`` declares a general float, stored as float16 (lossy).
    """

    denominators: tuple[int | None, ...]

    def __post_init__(self) -> None:
        for k in self.denominators:
            if k is not None and not (isinstance(k, int) and 1 <= k <= 65535):
                raise ValueError(f"denominators must be ints in [1, 65535] or None, got {k!r}")

    @property
    def dim(self) -> int:
        return len(self.denominators)

    @property
    def u8_index(self) -> tuple[int, ...]:
        return tuple(j for j, k in enumerate(self.denominators) if k is not None and k <= 255)

    @property
    def u16_index(self) -> tuple[int, ...]:
        return tuple(j for j, k in enumerate(self.denominators) if k is not None and k > 255)

    @property
    def f16_index(self) -> tuple[int, ...]:
        return tuple(j for j, k in enumerate(self.denominators) if k is None)

    @property
    def exact(self) -> bool:
        """True when every feature is stored exactly (no float16 part)."""
        return not self.f16_index

    @property
    def bytes_per_step(self) -> int:
        return len(self.u8_index) + 2 * len(self.u16_index) + 2 * len(self.f16_index)

    def _den(self, index: tuple[int, ...]) -> np.ndarray:
        return np.asarray([self.denominators[j] for j in index], np.float32)

    def encode(self, features: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """(..., D) float -> (uint8 (..., D8), uint16 (..., D16), float16 (..., Df)).

        n = round(f * k), clipped to [0, 255] / [0, 65535]; values that are not multiples
        of 1/k in [0, 1] do not survive (see `roundtrip_exact`)."""
        f = jnp.asarray(features, jnp.float32)

        def part(index: tuple[int, ...], hi: int, dtype: jnp.dtype) -> jax.Array:
            x = f[..., list(index)] * self._den(index)
            return jnp.clip(jnp.round(x), 0, hi).astype(dtype)

        u8 = part(self.u8_index, 255, jnp.uint8)
        u16 = part(self.u16_index, 65535, jnp.uint16)
        f16 = f[..., list(self.f16_index)].astype(jnp.float16)
        return u8, u16, f16

    def decode(self, u8: jax.Array, u16: jax.Array, f16: jax.Array) -> jax.Array:
        """Inverse of `encode`: (..., D) float32, features back in their original order."""
        one = np.float32(1)
        parts = [
            u8.astype(jnp.float32) * (one / self._den(self.u8_index)),
            u16.astype(jnp.float32) * (one / self._den(self.u16_index)),
            f16.astype(jnp.float32),
        ]
        order = self.u8_index + self.u16_index + self.f16_index
        inverse = np.argsort(np.asarray(order, np.int64)) if order else np.zeros(0, np.int64)
        return jnp.concatenate(parts, axis=-1)[..., inverse]

    def roundtrip_exact(self, features: np.ndarray | jax.Array) -> bool:
        """True when ``decode(encode(features))`` equals ``features`` bit for bit on the
        exact (integer-coded) features. Host side; for checking a feature source."""
        f = np.asarray(features, np.float32)
        back = np.asarray(self.decode(*self.encode(f)))
        exact = list(self.u8_index + self.u16_index)
        return bool(np.array_equal(back[..., exact], f[..., exact]))


def float16_codec(dim: int) -> FeatureCodec:
    """Codec storing all ``dim`` features as float16 (lossy; for MuJoCo features)."""
    return FeatureCodec((None,) * dim)


@struct.dataclass
class Trajectories:
    """Stored evaluation episodes: ``u8`` (..., M, T, D8) uint8, ``u16`` (..., M, T, D16)
    uint16, ``f16`` (..., M, T, Df) float16 (the codec's split of the D features) and
    ``lengths`` (..., M) int32. Steps at or past an episode's length are zero; an episode
    of length 0 is absent. The leading axes are (C,) in an archive, () for a candidate.
    """

    u8: jax.Array
    u16: jax.Array
    f16: jax.Array
    lengths: jax.Array
    codec: FeatureCodec = struct.field(pytree_node=False)

    @classmethod
    def encode(cls, codec: FeatureCodec, features: jax.Array, lengths: jax.Array) -> Trajectories:
        """From float features (..., M, T, D) and lengths (..., M) (clipped to T)."""
        features = jnp.asarray(features, jnp.float32)
        if features.shape[-1] != codec.dim:
            raise ValueError(f"features have D={features.shape[-1]}, codec D={codec.dim}")
        t = features.shape[-2]
        lengths = jnp.clip(jnp.asarray(lengths, jnp.int32), 0, t)
        mask = jnp.arange(t) < lengths[..., None]
        features = jnp.where(mask[..., None], features, 0.0)
        u8, u16, f16 = codec.encode(features)
        return cls(u8, u16, f16, lengths, codec)

    @classmethod
    def empty(
        cls, codec: FeatureCodec, *, episodes: int, steps: int, lead: tuple[int, ...] = ()
    ) -> Trajectories:
        """All-absent episodes with leading shape ``lead`` (lengths 0)."""
        shape = (*lead, episodes, steps)
        return cls(
            jnp.zeros((*shape, len(codec.u8_index)), jnp.uint8),
            jnp.zeros((*shape, len(codec.u16_index)), jnp.uint16),
            jnp.zeros((*shape, len(codec.f16_index)), jnp.float16),
            jnp.zeros((*lead, episodes), jnp.int32),
            codec,
        )

    def decode(self) -> tuple[jax.Array, jax.Array]:
        """(features (..., M, T, D) float32, lengths (..., M) int32)."""
        return self.codec.decode(self.u8, self.u16, self.f16), self.lengths

    @property
    def nbytes(self) -> int:
        return int(sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(self)))
