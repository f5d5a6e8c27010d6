"""How a visit's PPO training began, from its training log: the statistics every run
keeps per visit (``starts.csv``, `telapa.continual.rundir.RunDir.write_visit_start`, so
that an export, which drops the per-update logs, keeps them) and
`telapa.analysis.visit_starts` reads.

From a visit's training log (``train/NN-TAG.csv`` of a run directory: one row per PPO
update u = 1..U, with the update's mean policy entropy H_u in nats, the env steps s_u
into the visit after it, and the success rate of the training episodes that ended in its
rollout, NaN when none ended):

    entropy_start     = H_1                       the starting policy, on its own rollout
    entropy_early_max = max_{u <= ceil(early U)} H_u
    entropy_end       = H_U
    first_success     = s_u of the first u with a training-episode success > 0 (NaN: none)
    success_updates   = #{u : success_u > 0} / U
    train_sr_end      = mean of success_u over the last ceil(early U) updates with
                        episodes (NaN: none ended)
    bonus_share       = mean over u of the training bonus's share of the rollout's
                        reward (`telapa.rl.ppo.bonus_share`; 0 without a bonus; NaN for
                        a log written before it was logged)

Success is scored on the env's own reward: a training bonus in PPO's reward (the episodic
count bonus) is not a success.

A uniform policy over MiniGrid's 7 actions has entropy ln 7 = 1.95 nats.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

START_COLUMNS = ("entropy_start", "entropy_early_max", "entropy_end", "first_success",
                 "success_updates", "train_sr_end", "bonus_share")
"""The statistics of `visit_start`, in order."""
TRAIN_COLUMNS = ("step", "entropy", "success_rate")
"""The training-log columns `visit_start` reads."""
DEFAULT_EARLY = 0.25
"""``early`` of `visit_start`: the leading (and trailing) quarter of the updates; the one
each run keeps in ``starts.csv``."""


def visit_start(train: pd.DataFrame, *, early: float = DEFAULT_EARLY) -> dict[str, float]:
    """`START_COLUMNS` of one visit's training log (module docstring), its rows in update
    order; ``early`` in (0, 1] is the leading (and, for ``train_sr_end``, trailing)
    fraction of updates."""
    if not 0.0 < early <= 1.0:
        raise ValueError(f"early must be in (0, 1], got {early}")
    missing = [c for c in TRAIN_COLUMNS if c not in train]
    if missing:
        raise ValueError(f"training log is missing column(s) {missing}")
    if train.empty:
        raise ValueError("training log has no updates")
    entropy = train["entropy"].to_numpy(float)
    success = train["success_rate"].to_numpy(float)
    steps = train["step"].to_numpy(float)
    head = math.ceil(early * len(train))
    hits = np.flatnonzero(success > 0)  # NaN compares False: no episode ended
    ended = success[~np.isnan(success)]
    return {
        "entropy_start": float(entropy[0]),
        "entropy_early_max": float(entropy[:head].max()),
        "entropy_end": float(entropy[-1]),
        "first_success": float(steps[hits[0]]) if hits.size else math.nan,
        "success_updates": hits.size / len(train),
        "train_sr_end": float(ended[-head:].mean()) if ended.size else math.nan,
        "bonus_share": (float(train["bonus_share"].to_numpy(float).mean())
                        if "bonus_share" in train else math.nan),
    }


__all__ = ["DEFAULT_EARLY", "START_COLUMNS", "TRAIN_COLUMNS", "visit_start"]
