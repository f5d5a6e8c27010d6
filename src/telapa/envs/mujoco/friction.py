"""Friction shifts (paper App. "Continuous-Control Dynamics-Shift Evaluation in MuJoCo"):
regime F_s scales the sliding friction of every geom of the env's MuJoCo model by s,

    mu_slide[g] <- s * mu_slide_default[g]   for every geom g   (geom_friction[:, 0]),

leaving torsional and rolling friction (columns 1, 2) as they are. The scaling is
applied once, to the env instance's own compiled ``MjModel`` (gymnasium loads a fresh
model per instance), from the defaults read when the wrapper is created; nothing is
shared between instances, so a regime never leaks into another env or task. s = 1.00
multiplies by exactly 1.0 and leaves the model bit-identical.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np


def check_scale(scale: object) -> float:
    """``scale`` as a float; a one-line ``ValueError`` unless it is a finite number > 0."""
    if isinstance(scale, bool) or not (isinstance(scale, (int, float, np.floating))
                                       and math.isfinite(scale) and scale > 0):
        raise ValueError(f"friction scale must be a finite number > 0, got {scale!r}")
    return float(scale)


def scale_sliding_friction(model: object, scale: float) -> np.ndarray:
    """Multiplies the sliding friction of every geom of the ``MjModel`` ``model`` by
    ``scale`` in place (module docstring); returns the defaults it scaled."""
    default = np.array(model.geom_friction[:, 0], copy=True)
    model.geom_friction[:, 0] = default * scale
    return default


class FrictionScale(gym.Wrapper):
    """``env`` (a gymnasium MuJoCo env, wrapped or not) with sliding friction x ``scale``."""

    def __init__(self, env: gym.Env, scale: float):
        super().__init__(env)
        scale = check_scale(scale)
        model = getattr(env.unwrapped, "model", None)
        if model is None or not hasattr(model, "geom_friction"):
            raise ValueError(f"{env.spec.id if env.spec else env}: not a MuJoCo env "
                             "(no model.geom_friction); friction applies to MuJoCo envs only")
        self.scale = scale
        self.default_sliding = scale_sliding_friction(model, scale)
        """The model's sliding friction per geom before scaling."""
