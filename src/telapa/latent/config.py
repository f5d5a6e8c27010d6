"""Hyperparameters of the learned trajectory embedder (paper App. "Learned trajectory
embedding under drift"; selected values from the TeLAPA hyperparameter table).

Values the paper leaves open (layer widths, dropout probability, noise scale, batch size,
minimum anchors per batch) are documented field by field and in ``docs/assumptions.md``.
The model is frozen and hashable, so it can be a static argument of `jax.jit`.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt

from telapa.config import MAX_ITERATIONS, Iterations, StrictModel, UnitInterval, Width

OpenUnitLeft = Annotated[float, Field(gt=0.0, le=1.0)]
"""A fraction in (0, 1]."""


class LatentConfig(StrictModel):
    """Episode encoder, view generation, boundary update and global normalizer."""

    # --- Episode encoder (App. "Episode encoder architecture") ---
    feature_dim: PositiveInt = 11
    """D: per-step behaviour features (11 MiniGrid, 24 MuJoCo). A continual run sets it
    from the env family (`telapa.continual.preset.bind_env_family`); leave it unset."""
    latent_dim: Width = 8
    """d: latent dimension."""
    t_max: Iterations = 256
    """T_max: episodes are padded or truncated (first T_max steps kept) to this length."""
    step_hidden: tuple[Width, Width] = (64, 64)
    """Widths of W_1 and W_2 in MLP_step (paper silent)."""
    gru_hidden: Width = 64
    """GRU hidden size (paper silent)."""
    proj_hidden: Width = 64
    """Width of W_3 in Proj (paper silent)."""

    # --- Views (App. "View generation for contrastive training") ---
    crop_min_fraction: OpenUnitLeft = 0.6
    """rho: crop length L' ~ U{floor(rho * l), ..., l} of the valid length l."""
    feature_drop_prob: Annotated[float, Field(ge=0.0, lt=1.0)] = 0.1
    """Probability that a feature channel is zeroed in a view (paper silent)."""
    noise_std: NonNegativeFloat = 0.01
    """sigma_noise of the additive Gaussian noise (paper: "small"; value not given)."""

    # --- Boundary update (App. "Teacher--student boundary update") ---
    steps: Iterations = 700
    """K: Adam steps per boundary update (at most `MAX_ITERATIONS`)."""
    lr: PositiveFloat = 5e-4
    """Adam learning rate."""
    batch_size: Annotated[int, Field(ge=2, le=MAX_ITERATIONS)] = 64
    """B: episode sets per step (paper silent); min(B, bank size) is used."""
    anchor_fraction: UnitInterval = 0.33
    """Prescribed anchor share of each batch (and of the normalizer refit bank)."""
    min_anchors: NonNegativeInt = 8
    """Minimum anchors per batch (paper silent); distillation runs only when a batch
    holds at least this many anchors (i.e. the bank holds at least this many)."""
    anchor_sr_threshold: UnitInterval = 0.5
    """Success rate at or above which an episode set is stored as an anchor."""
    min_bank_sets: PositiveInt = 32
    """B_min: the boundary update runs only with at least this many episode sets."""
    w_contrast: NonNegativeFloat = 1.0
    w_distill: NonNegativeFloat = 1.0
    lambda_norm: NonNegativeFloat = 1.0
    """Weight of the norm (scale) term of the distillation loss."""
    temperature: PositiveFloat = 0.15
    """tau of InfoNCE (hyperparameter table; App. text says 0.1, the table's 0.15 wins)."""

    # --- Global normalizer (App. "Global latent normalization") ---
    sigma_min: NonNegativeFloat = 1e-3
    eps: NonNegativeFloat = 1e-8
