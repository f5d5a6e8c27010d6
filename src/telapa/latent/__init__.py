"""Learned trajectory embedding under drift (paper App. "Learned trajectory embedding
under drift"): episode encoder, policy-level summaries, contrastive views, the
teacher-student boundary update, and the robust global latent normalizer."""

from telapa.latent import normalizer
from telapa.latent.config import LatentConfig
from telapa.latent.embedder import (
    EpisodeEncoder,
    LatentSummary,
    embed_episodes,
    init_encoder,
    make_encoder,
    pad_episodes,
    pad_or_truncate,
    policy_summary,
    summarize,
)
from telapa.latent.losses import (
    Bank,
    bank_ready,
    boundary_loss,
    boundary_update,
    boundary_updates,
    distillation,
    info_nce,
    sample_batch,
)
from telapa.latent.normalizer import Normalizer, normalizer_id
from telapa.latent.views import (
    batch_views,
    crop_length_bounds,
    make_view,
    temporal_crop,
    two_views,
)

__all__ = [
    "Bank",
    "EpisodeEncoder",
    "LatentConfig",
    "LatentSummary",
    "Normalizer",
    "bank_ready",
    "batch_views",
    "boundary_loss",
    "boundary_update",
    "boundary_updates",
    "crop_length_bounds",
    "distillation",
    "embed_episodes",
    "info_nce",
    "init_encoder",
    "make_encoder",
    "make_view",
    "normalizer",
    "normalizer_id",
    "pad_episodes",
    "pad_or_truncate",
    "policy_summary",
    "sample_batch",
    "summarize",
    "temporal_crop",
    "two_views",
]
