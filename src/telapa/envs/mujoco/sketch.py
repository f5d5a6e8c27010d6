"""The 24-dimensional per-step trajectory sketch of MuJoCo envs (paper App. "Continuous-
Control Dynamics-Shift Evaluation in MuJoCo": "summary statistics of observation and
action, reward, cumulative return and normalized time"; the exact statistics are our
choice, docs/assumptions.md).

At step t (0-based) the policy saw o_{t-1} (n floats; o_{-1} is the reset observation),
took action a_t (m floats) and got o_t and reward r_t. With
a~_t = clip(a_t, low, high) / max(|low|, |high|) (per dimension; a~_{-1} = 0),
dO = o_t - o_{t-1}, dA = a~_t - a~_{t-1}, G_t = r_0 + ... + r_t, time limit T and the
family's reference return R* (`telapa.envs.mujoco.reference_return`), the sketch is

    x_t = [ mean(o_t), std(o_t), min(o_t), max(o_t), mean|o_t|, rms(o_t),
            q25(o_t), median(o_t), q75(o_t),                              #  0..8
            mean(dO), std(dO), mean|dO|, max|dO|,                          #  9..12
            mean(a~_t), std(a~_t), min(a~_t), max(a~_t), mean|a~_t|, rms(a~_t),  # 13..18
            mean|dA|, rms(dA),                                             # 19..20
            r_t T / R*,  G_t / R*,  (t + 1) / T ]                          # 21..23

over the entries of each vector: std is the population standard deviation, rms(v) =
sqrt(mean v^2), quantiles interpolate linearly (``numpy.quantile``'s default). Rewards
are in units of R* (a constant r_t = R*/T scores 1 and reaches G_T = R*), so the sketch
is comparable across friction regimes and environments. Computed in float64, stored as
float32.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

SKETCH_NAMES = (
    "obs_mean", "obs_std", "obs_min", "obs_max", "obs_abs_mean", "obs_rms",
    "obs_q25", "obs_median", "obs_q75",
    "dobs_mean", "dobs_std", "dobs_abs_mean", "dobs_abs_max",
    "act_mean", "act_std", "act_min", "act_max", "act_abs_mean", "act_rms",
    "dact_abs_mean", "dact_rms",
    "reward_paced", "return_normalized", "time",
)
SKETCH_DIM = len(SKETCH_NAMES)
"""D = 24."""


def _quantile_weights(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Indices and weights of ``numpy.quantile``'s linear interpolation at 0.25, 0.5,
    0.75 of n sorted values: q = s[lo] + w (s[lo + 1] - s[lo])."""
    pos = np.array([0.25, 0.5, 0.75]) * (n - 1)
    lo = np.floor(pos).astype(np.intp)
    hi = np.minimum(lo + 1, n - 1)
    return lo, hi, pos - lo


_WEIGHTS: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def sketch(
    *,
    obs: np.ndarray,
    prev_obs: np.ndarray,
    action: np.ndarray,
    prev_action: np.ndarray,
    reward: float,
    episode_return: float,
    t: int,
    time_limit: int,
    reference_return: float,
) -> np.ndarray:
    """The (24,) float32 sketch x_t (module docstring); ``action`` and ``prev_action``
    are already scaled (a~), ``episode_return`` is G_t (including ``reward``).

    The one-env form of `sketch_batch` (the gymnasium backend's wrapper calls it at every
    step), written with the same operations on one row, so that it equals row i of
    `sketch_batch` bit for bit (tests/envs/test_mujoco_native.py), at 2.3x its speed for
    one env (62 against 144 µs measured, both quiet)."""
    o = np.asarray(obs, np.float64).reshape(-1)
    d_o = o - np.asarray(prev_obs, np.float64).reshape(-1)
    a = np.asarray(action, np.float64).reshape(-1)
    d_a = a - np.asarray(prev_action, np.float64).reshape(-1)
    n, m = o.size, a.size
    if n not in _WEIGHTS:
        _WEIGHTS[n] = _quantile_weights(n)
    lo, hi, w = _WEIGHTS[n]
    s = np.sort(o)
    q = s[lo] + w * (s[hi] - s[lo])
    abs_o, abs_do, abs_a = np.abs(o), np.abs(d_o), np.abs(a)
    o_mean, do_mean, a_mean = o.sum() / n, d_o.sum() / n, a.sum() / m
    o_dev, do_dev, a_dev = o - o_mean, d_o - do_mean, a - a_mean
    x = np.empty(SKETCH_DIM, np.float64)
    x[0:9] = (o_mean, np.sqrt((o_dev * o_dev).sum() / n), s[0], s[-1], abs_o.sum() / n,
              np.sqrt((o * o).sum() / n), q[0], q[1], q[2])
    x[9:13] = (do_mean, np.sqrt((do_dev * do_dev).sum() / n), abs_do.sum() / n, abs_do.max())
    x[13:19] = (a_mean, np.sqrt((a_dev * a_dev).sum() / m), a.min(), a.max(),
                abs_a.sum() / m, np.sqrt((a * a).sum() / m))
    x[19:21] = (np.abs(d_a).sum() / m, np.sqrt((d_a * d_a).sum() / m))
    x[21:24] = (reward * time_limit / reference_return, episode_return / reference_return,
                (t + 1) / time_limit)
    return x.astype(np.float32)


def sketch_batch(
    *,
    obs: np.ndarray,
    prev_obs: np.ndarray,
    action: np.ndarray,
    prev_action: np.ndarray,
    reward: np.ndarray,
    episode_return: np.ndarray,
    t: np.ndarray,
    time_limit: int,
    reference_return: float,
) -> np.ndarray:
    """The (N, 24) float32 sketches x_t of N envs at once: row i is the sketch of
    ``obs[i]`` (N, n), ``prev_obs[i]``, ``action[i]`` (N, m, scaled), ``prev_action[i]``,
    ``reward[i]``, ``episode_return[i]`` and step ``t[i]`` (module docstring).

    Written for speed (it runs at every host step): one sort gives min, max and the
    quartiles; means, standard deviations and rms come from sums along each row
    (float64), which do not depend on N, so row i equals the sketch of env i alone."""
    o = np.asarray(obs, np.float64)
    d_o = o - np.asarray(prev_obs, np.float64)
    a = np.asarray(action, np.float64)
    d_a = a - np.asarray(prev_action, np.float64)
    n, m = o.shape[1], a.shape[1]
    if n not in _WEIGHTS:
        _WEIGHTS[n] = _quantile_weights(n)
    lo, hi, w = _WEIGHTS[n]
    s = np.sort(o, axis=1)
    q = s[:, lo] + w * (s[:, hi] - s[:, lo])
    abs_do = np.abs(d_o)
    o_mean = o.sum(axis=1, keepdims=True) / n
    do_mean = d_o.sum(axis=1, keepdims=True) / n
    a_mean = a.sum(axis=1, keepdims=True) / m
    o_dev, do_dev, a_dev = o - o_mean, d_o - do_mean, a - a_mean

    def mean(x: np.ndarray) -> np.ndarray:
        return x.sum(axis=1) / x.shape[1]

    x = np.empty((o.shape[0], SKETCH_DIM), np.float64)
    x[:, 0:9] = np.column_stack((
        o_mean[:, 0], np.sqrt(mean(o_dev * o_dev)), s[:, 0], s[:, -1], mean(np.abs(o)),
        np.sqrt(mean(o * o)), q))
    x[:, 9:13] = np.column_stack((do_mean[:, 0], np.sqrt(mean(do_dev * do_dev)),
                                  mean(abs_do), abs_do.max(axis=1)))
    x[:, 13:19] = np.column_stack((a_mean[:, 0], np.sqrt(mean(a_dev * a_dev)),
                                   a.min(axis=1), a.max(axis=1), mean(np.abs(a)),
                                   np.sqrt(mean(a * a))))
    x[:, 19:21] = np.column_stack((mean(np.abs(d_a)), np.sqrt(mean(d_a * d_a))))
    x[:, 21:24] = np.column_stack((
        np.asarray(reward, np.float64) * time_limit / reference_return,
        np.asarray(episode_return, np.float64) / reference_return,
        (np.asarray(t) + 1) / time_limit))
    return x.astype(np.float32)


class MujocoSketch(gym.Wrapper):
    """Box observation -> ``{"obs": float32 vector}``; ``info["features"]`` = the sketch
    of the step (module docstring). Wrap outside the time limit so ``T`` is known."""

    def __init__(self, env: gym.Env, *, reference_return: float, time_limit: int):
        super().__init__(env)
        box, act = env.observation_space, env.action_space
        if not isinstance(box, gym.spaces.Box) or not isinstance(act, gym.spaces.Box):
            raise ValueError(f"{env.spec.id if env.spec else env}: the MuJoCo sketch needs Box "
                             f"observation and action spaces, got {box} and {act}")
        if time_limit < 1:
            raise ValueError(f"time_limit must be >= 1, got {time_limit}")
        size = int(np.prod(box.shape))
        self.observation_space = gym.spaces.Dict(
            {"obs": gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)}
        )
        self.reference_return = float(reference_return)
        self.time_limit = int(time_limit)
        self._low = np.asarray(act.low, np.float64)
        self._high = np.asarray(act.high, np.float64)
        self._scale = np.maximum(np.abs(self._low), np.abs(self._high))
        self._reset_episode(np.zeros(size))

    def _reset_episode(self, obs: np.ndarray) -> None:
        self._prev_obs = np.asarray(obs, np.float64).reshape(-1)
        self._prev_action = np.zeros(self._scale.shape, np.float64)
        self._return = 0.0
        self._t = 0

    def reset(self, **kwargs: Any):
        obs, info = self.env.reset(**kwargs)
        self._reset_episode(obs)
        flat = np.asarray(obs, np.float32).reshape(-1)
        return {"obs": flat}, {**info, "features": np.zeros(SKETCH_DIM, np.float32)}

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        scaled = np.clip(np.asarray(action, np.float64), self._low, self._high) / self._scale
        self._return += float(reward)
        features = sketch(
            obs=obs, prev_obs=self._prev_obs, action=scaled, prev_action=self._prev_action,
            reward=float(reward), episode_return=self._return, t=self._t,
            time_limit=self.time_limit, reference_return=self.reference_return,
        )
        self._prev_obs = np.asarray(obs, np.float64).reshape(-1)
        self._prev_action = scaled
        self._t += 1
        flat = np.asarray(obs, np.float32).reshape(-1)
        return {"obs": flat}, reward, terminated, truncated, {**info, "features": features}
