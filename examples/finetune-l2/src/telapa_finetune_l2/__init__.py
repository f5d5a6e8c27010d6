"""Finetune-L2: one PPO learner across the sequence (Finetune) whose loss carries an L2
penalty on the weights, ``lam * ||theta||^2`` (L2 regularisation, one of the simplest
remedies for the loss of plasticity: Lyle et al. 2023, Kumar et al. 2023).

A telapa method plug-in in one module: the class says its ``name``, its own settings
``section`` and the pydantic model of that section (``settings_model``); the package's
``telapa.methods`` entry point names the class, so ``telapa run --method finetune-l2``
finds it, and ``methods.finetune_l2.lam`` works in run presets, ``--set`` and sweep
grids, is written to each run's ``config.yaml`` and groups its runs in ``telapa metrics``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from pydantic import NonNegativeFloat

from telapa.config import StrictModel
from telapa.continual.methods import Finetune


class FinetuneL2Config(StrictModel):
    """``methods.finetune_l2`` of a run preset."""

    lam: NonNegativeFloat = 1e-4
    """The penalty's strength lambda."""


def squared_norm(params: Any) -> jax.Array:
    """``||theta||^2``, the sum of the squares of every parameter."""
    return sum(jnp.sum(p**2) for p in jax.tree.leaves(params))


class FinetuneL2(Finetune):
    """Finetune with ``lam * ||theta||^2`` added to the PPO loss of every visit."""

    name = "finetune-l2"
    section = "finetune_l2"
    settings_model = FinetuneL2Config

    def __init__(self, settings: FinetuneL2Config | None = None, **kwargs: Any):
        super().__init__(settings, **kwargs)  # key, eval_episodes
        lam = self.settings.lam  # methods.finetune_l2 of the run, validated by FinetuneL2Config
        self.penalty = lambda params, data: lam * squared_norm(params)


__all__ = ["FinetuneL2", "FinetuneL2Config", "squared_norm"]
