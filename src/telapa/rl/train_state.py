"""What PPO training changes and reports: the `TrainState` pytree, batches of states,
metrics and the errors of non-finite losses (`telapa.rl.agent.Agent` trains them; import
them from there)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from flax import struct

from telapa import pytrees
from telapa.config import TrainConfig
from telapa.envs.base import Obs
from telapa.rl.evaluate import EvalResult
from telapa.rl.ppo import EpisodeTracker, PPOState

Metrics = dict[str, float]
ProgressFn = Callable[[int, list[Metrics]], None]
BatchProgressFn = Callable[[int, list[list[Metrics]]], None]

LOSS_METRICS = ("loss", "pg_loss", "v_loss", "grad_norm")
"""The metrics whose non-finite value stops training (FloatingPointError)."""

DIVERGENCE_SETTINGS = (("lr", "the learning rate", 1e-2),
                       ("reward_scale", "the reward scale", 1e3),
                       ("max_grad_norm", "the gradient norm clip", 1e3),
                       ("vf_coef", "the value loss weight", 1e3),
                       ("ent_coef", "the entropy weight", 1e3))
"""PPO settings that make losses overflow when they are large, each with the value above
which it is unusual (the presets use lr <= 1e-3, reward_scale 1, max_grad_norm 0.5,
vf_coef 0.5, ent_coef <= 0.01): a non-finite loss names those past it as its likely cause
(`divergence_hint`)."""


def divergence_hint(config: TrainConfig) -> str:
    """What a non-finite loss most likely comes from: the `DIVERGENCE_SETTINGS` of
    ``config`` past their usual range, with their values, or else the learning rate."""
    ppo = config.ppo
    unusual = [f"ppo.{key}={getattr(ppo, key):g} ({what}; usually at most {bound:g})"
               for key, what, bound in DIVERGENCE_SETTINGS if getattr(ppo, key) > bound]
    if unusual:
        return f"likely cause: {', '.join(unusual)}"
    return f"no PPO setting is unusual; try a smaller learning rate (ppo.lr={ppo.lr:g})"


def metric_rows(metrics: dict[str, Any], first_step: int, per_iteration: int) -> list[Metrics]:
    """K iterations' metrics (each stacked on a leading axis K) -> K host dicts, row j with
    ``step`` = ``first_step + j * per_iteration`` (the step count after iteration j)."""
    host = jax.device_get(metrics)
    count = len(next(iter(host.values())))
    rows = [{name: float(v[j]) for name, v in host.items()} for j in range(count)]
    for j, row in enumerate(rows):
        row["step"] = first_step + j * per_iteration
    return rows


def check_finite(rows: Sequence[Metrics], env_id: str, config: TrainConfig) -> None:
    """Raises FloatingPointError at the first row with a non-finite `LOSS_METRICS` value,
    naming them, its step and their likely cause (`divergence_hint`)."""
    for row in rows:
        bad = [name for name in LOSS_METRICS if not np.isfinite(row[name])]
        if bad:
            raise FloatingPointError(f"PPO on {env_id}: non-finite {', '.join(bad)} at step "
                                     f"{row['step']}; {divergence_hint(config)}")


class BatchMemberError(FloatingPointError):
    """A non-finite loss in member ``member`` of a batch of states
    (`Agent.train_and_evaluate`; ``error``: the FloatingPointError that member alone
    would have raised)."""

    def __init__(self, member: int, error: FloatingPointError):
        super().__init__(f"batch member {member}: {error}")
        self.member, self.error = member, error


@struct.dataclass
class TrainState:
    """Everything PPO training changes (a pytree; stack S of them, `stack_states`, for
    `Agent.train_and_evaluate`)."""

    ppo: PPOState
    tracker: EpisodeTracker
    """Return and length of every training env's episode in progress."""
    env_state: Any
    """The training envs' states (None on the gymnasium backend: they live on the host)."""
    obs: Obs
    """The training envs' current observations."""
    key: jax.Array
    """The rollout's key (actions, PPO minibatch permutations)."""
    steps: jax.Array
    """int32: env steps trained since `Agent.start` (all envs together)."""


stack_states = pytrees.stack
"""S states (pytrees of one structure) -> one with a leading axis S (`telapa.pytrees`)."""
unstack_states = pytrees.unstack
"""Inverse of `stack_states`."""


def episodes_key(key: jax.Array) -> jax.Array:
    """The key of fresh training episodes drawn from a visit's (or a probe's) key:
    ``split(split(key)[0])[1]``. This is the derivation of the stateful trainer that the
    continual runner used before its state became explicit (reseed, then reset the
    rollout), kept so that runs reproduce the results of earlier versions bit for bit."""
    return jax.random.split(jax.random.split(key)[0])[1]


@dataclasses.dataclass(frozen=True)
class ChunkResult:
    """What `Agent.train_and_evaluate` brings back to the host for S states."""

    metrics: list[list[Metrics]]
    """Per state, one metrics dict per PPO iteration (as `Agent.train` returns them)."""
    evaluations: list[EvalResult]
    """Per state, the evaluation of its parameters after the training (empty without
    evaluation episodes)."""


__all__ = ["DIVERGENCE_SETTINGS", "LOSS_METRICS", "BatchMemberError", "BatchProgressFn",
           "ChunkResult", "Metrics", "ProgressFn", "TrainState", "check_finite",
           "divergence_hint", "episodes_key", "metric_rows", "stack_states", "unstack_states"]
