"""The embedding manager M = (f_phi, N_t) of Algorithm TeLAPA: the current trajectory
encoder, the global normalizer and a version counter, and how a policy's evaluation
episodes become its descriptor under them."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from telapa.latent import LatentConfig, Normalizer, init_encoder, policy_summary
from telapa.latent import normalizer as latent_normalizer
from telapa.rl.networks import Params


@struct.dataclass
class EmbeddingState:
    """Encoder parameters, normalizer and version. `create` gives the identity normalizer
    ("no normalizer" in Algorithm TeLAPA); TeLAPA fits N_0 before its first illumination
    (`telapa.continual.methods.telapa.maintenance.fit_initial_normalizer`)."""

    encoder: Params
    normalizer: Normalizer
    version: jax.Array

    @classmethod
    def create(cls, key: jax.Array, config: LatentConfig) -> EmbeddingState:
        return cls(
            init_encoder(key, config),
            Normalizer.identity(config.latent_dim, config.eps),
            jnp.int32(0),
        )

    @property
    def normalizer_id(self) -> str:
        return self.normalizer.id

    @property
    def has_normalizer(self) -> bool:
        """Whether N has been fit (False while it is the identity of `create`)."""
        identity = Normalizer.identity(self.normalizer.median.shape[-1], self.normalizer.eps)
        return self.normalizer_id != identity.id


def describe(
    state: EmbeddingState, features: jax.Array, lengths: jax.Array, config: LatentConfig
) -> tuple[jax.Array, jax.Array]:
    """``(raw, descriptor)`` of B policies from their episodes (B, M, T, D), (B, M):
    raw = [z_mean, z_std_ep, z_std_time] (B, 3d); descriptor = N_t(z_mean) (B, d)."""
    summary = policy_summary(state.encoder, features, lengths, config)
    return summary.raw, latent_normalizer.apply(state.normalizer, summary.z_mean)
