"""Policy evaluation: success rate, returns, lengths and per-step behaviour features.

SR is the env family's competence of the episode returns (`telapa.envs.family`): the
fraction of episodes with positive return for MiniGrid (paper eq. for SR; a positive
return means the goal was reached), clip(E[R] / R*, 0, 1) for MuJoCo. Per-step features
(``info["features"]``, D per step) are returned zero-padded to ``max_steps`` with the
episode lengths, the layout the latent embedder consumes.

On the jax backend `make_jax_evaluator` gives a pure ``evaluate(params, key)`` and
`make_population_evaluator` the same for a batch of parameter sets (illumination's
candidates): each candidate's lanes run its episodes from a queue, with randomness per
episode, so results do not depend on the lanes or the batch. On the gymnasium backend
`evaluate_gym` runs a host loop; on the native backend `evaluate_native` runs S
parameter sets x E episodes as one batch of S * E host envs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from telapa.envs.base import JaxEnv, Obs
from telapa.envs.family import Competence
from telapa.envs.host import HostVectorEnv
from telapa.rl.networks import Params
from telapa.rl.policy import Policy
from telapa.rl.rollout import ActFn

if TYPE_CHECKING:
    from telapa.envs.mujoco.native import NativeVectorEnv


@dataclass(frozen=True)
class EvalResult:
    returns: np.ndarray
    """(E,) undiscounted episode returns."""
    lengths: np.ndarray
    """(E,) episode lengths in steps."""
    features: np.ndarray
    """(E, T, D) per-step behaviour features, zero past each episode's length."""
    competence: Competence
    """The env family's competence score of the returns (`EnvFamily.competence`)."""

    @property
    def sr(self) -> float:
        """The competence of the episodes (e.g. MiniGrid's success rate, MuJoCo's
        normalized return SR~)."""
        return float(self.competence(np.asarray(self.returns)))

    @property
    def episodes(self) -> int:
        """n, the episodes evaluated."""
        return int(np.asarray(self.returns).shape[0])

    @property
    def successes(self) -> int | None:
        """k, the episodes that succeeded, when the competence is a count (``sr`` is then
        k / n, kept exactly as the pair; `Competence.successes`); None otherwise."""
        return self.competence.successes(np.asarray(self.returns))

    @property
    def mean_return(self) -> float:
        return float(np.mean(self.returns))

    @property
    def mean_length(self) -> float:
        return float(np.mean(self.lengths))


class _Lanes(NamedTuple):
    """The (B, L) lanes of `make_population_evaluator`'s loop."""

    state: Any
    obs: Obs
    key: jax.Array
    """Action key of the lane's episode (``fold_in(key, t)`` acts at step t)."""
    episode: jax.Array
    """Index of the episode the lane runs, E when the candidate has none left."""
    t: jax.Array
    """Steps the episode has taken."""
    ret: jax.Array
    """Its return so far."""


class _Episodes(NamedTuple):
    """Per-candidate results of `make_population_evaluator`'s loop."""

    queued: jax.Array
    """(B,) the next unstarted episode (E: none left)."""
    returns: jax.Array
    lengths: jax.Array
    features: jax.Array


CPU_LANE_TARGET = 32
"""Lanes of a whole batch that `default_lanes` aims for on CPU (see there)."""


def default_lanes(episodes: int, batch: int = 1, *, platform: str | None = None) -> int:
    """Lanes per candidate when `make_population_evaluator` is given none.

    On CPU ``min(max(ceil(CPU_LANE_TARGET / batch), 2), ceil(episodes / 4))``: 13 at
    B = 1 and E = 50, 4 at B = 8, 2 from B = 16. A loop iteration costs a fixed overhead
    plus a cost per lane, so fewer lanes idle less behind a long episode but take more
    iterations. Measured on DoorKey-8x8 near-copies of a trained policy (E = 50): B = 1
    ran alike with 10 to 17 lanes (25 and 7 slower), B = 8 fastest with 4 of 4 to 13,
    B = 32 alike with 1, 2 and 4 (7 slower); 2 rather than 1 costs 1.5x less when every
    episode runs to the time limit, where each halving of L doubles the iterations. At
    least 4 episodes per lane let the queue balance a candidate's lanes. On
    accelerators (``platform`` other than ``"cpu"``; default `jax.default_backend`)
    ``episodes``: every episode starts at once, since there an iteration's launch
    overhead dwarfs the lanes' work (fewer lanes unmeasured). Numbers:
    BENCHMARKS.md, "Evaluation lanes" (the design: docs/performance.md, "Evaluation lanes")."""
    episodes = check_positive("episodes", episodes)
    batch = check_positive("batch", batch)
    if (platform or jax.default_backend()) != "cpu":
        return episodes
    return min(max(-(-CPU_LANE_TARGET // batch), 2), -(-episodes // 4))


def make_population_evaluator(
    env: JaxEnv,
    policy: Policy,
    episodes: int,
    max_steps: int,
    deterministic: bool = False,
    *,
    feature_steps: int | None = None,
    lanes: int | None = None,
    count_iterations: bool = False,
) -> Callable[..., tuple[jax.Array, ...]]:
    """Pure ``evaluate(params, keys) -> (returns, lengths, features)`` of B parameter sets
    (``params`` leaves and ``keys`` with a leading axis B), ``episodes`` = E episodes
    each, every episode stopped at its end or after ``max_steps`` steps. Shapes (B, E),
    (B, E) and (B, E, feature_steps, D) (default ``feature_steps = max_steps``: the
    first steps of each episode, zero past its length). With ``count_iterations`` a
    fourth output: the loop's iteration count I (int32 scalar); the loop stepped
    B x L x I lanes for ``lengths.sum()`` env steps.

    Schedule. Each candidate has L = ``lanes`` <= E lanes (default `default_lanes` of E
    and B) and a queue of its episodes 0..E-1: lane l starts episode l, and a lane whose
    episode ends takes the candidate's next unstarted episode (lanes ending at the same
    step take them in lane order) until none is left; the loop runs while any lane holds
    an episode. This greedy list scheduling bounds a candidate's makespan by
    ``sum(lengths) / L + max(lengths)`` steps; a static quota of E / L episodes per lane
    can stack long episodes on one lane while the others idle. With L = E (the loop
    before issue 15) every lane waits for the batch's longest episode: DoorKey-8x8
    near-copies of a trained policy last ~35 steps, but one episode at the 640-step time
    limit kept all B x E lanes stepping. Lanes are per candidate, not a pool shared by
    the batch: a shared lane would switch parameter sets between episodes, and gathering
    a parameter set per lane per step costs more than the env step. The price of fewer
    lanes is more iterations when every episode is long (a policy that never reaches
    the goal): up to ceil(E / L) x ``max_steps``.

    Randomness is per episode, so results do not depend on L, B or the schedule: with
    ``reset_key, act_key = split(keys[b])``, episode e of candidate b starts from
    ``env.reset(split(reset_key, E)[e])`` and samples its action at step t with
    ``fold_in(split(act_key, E)[e], t)``. All B x E start states are reset once before
    the loop (the same resets as episodes); a lane that takes an episode copies its start
    state in.

    All B x L lanes advance in one ``while_loop`` whose condition is a scalar, so a
    finished candidate costs masked lanes, not a copy of the carry per step as a ``vmap``
    of a per-candidate ``while_loop`` would. Returns, lengths and feature rows are
    written to the episode's own slot (row t of episode e for t < ``feature_steps``)."""
    episodes = check_positive("episodes", episodes)
    max_steps = check_positive("max_steps", max_steps)
    keep = max_steps if feature_steps is None else check_positive("feature_steps", feature_steps)
    if lanes is not None and not 1 <= check_positive("lanes", lanes) <= episodes:
        raise ValueError(f"lanes must be at most episodes ({episodes}), got {lanes}")
    reset = jax.vmap(jax.vmap(env.reset))
    step = jax.vmap(jax.vmap(env.step))
    split = jax.vmap(lambda k: jax.random.split(k, episodes))
    fold_in = jax.vmap(jax.vmap(jax.random.fold_in))

    def act_one(params: Params, obs, key: jax.Array) -> jax.Array:
        one = jax.tree.map(lambda x: x[None], obs)
        return policy.act(params, one, key, deterministic).env_action[0]

    act = jax.vmap(jax.vmap(act_one, in_axes=(None, 0, 0)))
    dim = env.spec.feature_dim

    def evaluate(params: Params, keys: jax.Array):
        b = keys.shape[0]
        n_lanes = default_lanes(episodes, b) if lanes is None else int(lanes)
        pair = jax.vmap(jax.random.split)(keys)
        episode_keys = split(pair[:, 1])
        first_state, first_obs = reset(split(pair[:, 0]))
        row = jnp.broadcast_to(jnp.arange(b)[:, None], (b, n_lanes))
        start = _Lanes(
            *jax.tree.map(lambda x: x[:, :n_lanes], (first_state, first_obs, episode_keys)),
            episode=jnp.broadcast_to(jnp.arange(n_lanes, dtype=jnp.int32), (b, n_lanes)),
            t=jnp.zeros((b, n_lanes), jnp.int32),
            ret=jnp.zeros((b, n_lanes), jnp.float32),
        )
        out = _Episodes(
            queued=jnp.full((b,), n_lanes, jnp.int32),
            returns=jnp.zeros((b, episodes), jnp.float32),
            lengths=jnp.zeros((b, episodes), jnp.int32),
            features=jnp.zeros((b, episodes, keep, dim), jnp.float32),
        )

        def running(carry: tuple[jax.Array, _Lanes, _Episodes]) -> jax.Array:
            return (carry[1].episode < episodes).any()

        def finish(ended: jax.Array, lanes: _Lanes, out: _Episodes) -> tuple[_Lanes, _Episodes]:
            """Records the ended episodes; their lanes take the candidate's next ones (a
            lane left without one idles on episode E - 1's start state, masked). ``out``
            comes without the feature buffer, which a ``cond`` might copy."""
            slot = jnp.where(ended, lanes.episode, episodes)  # out of range: write dropped
            returns = out.returns.at[row, slot].set(lanes.ret, mode="drop")
            lengths = out.lengths.at[row, slot].set(lanes.t, mode="drop")
            taken = out.queued[:, None] + jnp.cumsum(ended, axis=1, dtype=jnp.int32) - 1
            episode = jnp.where(ended, jnp.minimum(taken, episodes), lanes.episode)
            queued = jnp.minimum(out.queued + ended.sum(axis=1, dtype=jnp.int32), episodes)
            fresh = jnp.minimum(episode, episodes - 1)
            state, obs, key = jax.tree.map(
                lambda first, now: _where_lanes(ended, first[row, fresh], now),
                (first_state, first_obs, episode_keys), (lanes.state, lanes.obs, lanes.key),
            )
            lanes = _Lanes(
                state, obs, key, episode, jnp.where(ended, 0, lanes.t),
                jnp.where(ended, 0.0, lanes.ret),
            )
            return lanes, out._replace(queued=queued, returns=returns, lengths=lengths)

        def body(carry: tuple[jax.Array, _Lanes, _Episodes]):
            i, lanes, out = carry
            active = lanes.episode < episodes
            action = act(params, lanes.obs, fold_in(lanes.key, lanes.t))
            state, obs, reward, terminated, truncated, info = step(lanes.state, action)
            row_t = jnp.where(active & (lanes.t < keep), lanes.episode, episodes)
            features = out.features.at[row, row_t, lanes.t].set(
                info["features"].astype(jnp.float32), mode="drop"
            )
            t = lanes.t + 1
            ended = active & (terminated | truncated | (t >= max_steps))
            lanes = lanes._replace(
                state=state, obs=obs, t=t, ret=lanes.ret + reward.astype(jnp.float32)
            )
            lanes, out = jax.lax.cond(
                ended.any(), finish, lambda _, *rest: rest, ended, lanes,
                out._replace(features=None),
            )
            return i + 1, lanes, out._replace(features=features)

        i, _, out = jax.lax.while_loop(running, body, (jnp.int32(0), start, out))
        result = (out.returns, out.lengths, out.features)
        return (*result, i) if count_iterations else result

    return evaluate


def make_jax_evaluator(
    env: JaxEnv,
    policy: Policy,
    episodes: int,
    max_steps: int,
    deterministic: bool = False,
    *,
    lanes: int | None = None,
) -> Callable[[Params, jax.Array], tuple[jax.Array, jax.Array, jax.Array]]:
    """Pure ``evaluate(params, key) -> (returns, lengths, features)`` of ``episodes``
    episodes, each stopped at its end or after ``max_steps`` steps: the population
    evaluator with B = 1 (its schedule over ``lanes`` and its keys: episode e starts
    from ``env.reset(split(reset_key, episodes)[e])`` and acts at step t with
    ``fold_in(split(act_key, episodes)[e], t)``, where ``reset_key, act_key =
    split(key)``)."""
    population = make_population_evaluator(
        env, policy, episodes, max_steps, deterministic, lanes=lanes
    )

    def evaluate(params: Params, key: jax.Array):
        one = jax.tree.map(lambda x: x[None], params)
        ret, length, feats = population(one, key[None])
        return ret[0], length[0], feats[0]

    return evaluate


def check_positive(name: str, value: int) -> int:
    """``value`` as an int when it is an integer >= 1 (not a bool); a `ValueError` naming
    ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def _where_lanes(mask: jax.Array, new: jax.Array, old: jax.Array) -> jax.Array:
    """``new`` in the (B, L) lanes where ``mask``, else ``old`` (leaves (B, L, ...))."""
    return jnp.where(mask.reshape(mask.shape + (1,) * (old.ndim - mask.ndim)), new, old)


def evaluate_gym(
    env: HostVectorEnv,
    act: ActFn,
    params: Params,
    episodes: int,
    key: jax.Array,
    max_steps: int,
    competence: Competence,
) -> EvalResult:
    """Runs ``episodes`` episodes on the host, split evenly over ``env``'s copies, and
    scores them with the env family's ``competence``.

    Each copy runs a fixed quota of consecutive episodes, so short episodes are not
    over-represented.
    """
    n = env.num_envs
    quota = [episodes // n + (i < episodes % n) for i in range(n)]
    finished: list[list[tuple[float, int, np.ndarray]]] = [[] for _ in range(n)]
    running = [(0.0, []) for _ in range(n)]
    reset_key, key = jax.random.split(key)
    _, obs = env.reset(reset_key)
    while any(len(f) < q for f, q in zip(finished, quota, strict=True)):
        a, key = act(params, obs, key)
        _, obs, reward, terminated, truncated, info = env.step(None, np.asarray(a.env_action))
        done = terminated | truncated
        for i in range(n):
            if len(finished[i]) >= quota[i]:
                continue
            ret, feats = running[i]
            feats.append(info["features"][i])
            ret += float(reward[i])
            if done[i]:
                finished[i].append((ret, len(feats), np.stack(feats)))
                ret, feats = 0.0, []
            running[i] = (ret, feats)
    episodes_ = [e for per_env in finished for e in per_env]
    lengths = np.array([length for _, length, _ in episodes_], np.int32)
    horizon = max(max_steps, int(lengths.max()))
    features = np.zeros((episodes, horizon, env.spec.feature_dim), np.float32)
    for j, (_, length, f) in enumerate(episodes_):
        features[j, :length] = f
    returns = np.array([r for r, _, _ in episodes_], np.float32)
    return EvalResult(returns, lengths, features, competence)


HostSetActions = Callable[[jax.Array], Callable[[Obs, int], np.ndarray]]
"""``host(act_keys)``: for the S sets' action keys, ``actions(obs, t)`` giving the (S, E,
...) env actions of step t in numpy (`telapa.rl.host_policy.HostActions`)."""


def _set_actions(act: ActFn | None, host: HostSetActions | None, params: Params,
                 keys: jax.Array) -> Callable[[Obs, int], np.ndarray]:
    """``actions(obs, t)`` of S sets: ``host``'s (what it draws, it draws for every step
    at once), else the jitted ``act`` vmapped over the sets, its key advanced per step."""
    if host is not None:
        return host(keys)
    key = keys

    def actions(obs: Obs, t: int) -> np.ndarray:
        nonlocal key
        a, key = act(params, obs, key)
        return np.asarray(a.env_action)

    return actions


def evaluate_native(
    env: NativeVectorEnv,
    act: ActFn | None,
    params: Params,
    episodes: int,
    keys: jax.Array,
    max_steps: int,
    competence: Competence,
    *,
    features: bool = True,
    feature_steps: int | None = None,
    host: HostSetActions | None = None,
) -> list[EvalResult]:
    """S stacked parameter sets (leading axis S), ``episodes`` (E) episodes each, as ONE
    batch of host envs: ``env`` has S * E envs and env (i, e) = i E + e runs episode e of
    set i, once; every step acts for all S sets with ``act`` vmapped over them (its
    arguments ``(params, obs, key)`` with a leading axis S) and steps the envs whose
    episode runs (`NativeVectorEnv.advance`).

    Keys: set i with ``keys[i]`` as `evaluate_gym` with E env copies: ``reset_key,
    act_key = split(keys[i])``, env (i, e) reset with seed ``seed_from(reset_key) + e``
    (gymnasium's vector seeding), and at every step ``a, act_key = act(params_i,
    obs_i, act_key)`` on the set's (E, ...) observations (a finished episode's row keeps
    its last observation; rows do not interact). So set i's episodes do not depend on
    S or on the other sets, and equal those of the gymnasium backend's `evaluate_gym`
    with E copies up to XLA's numerics of the vmapped policy. With ``host`` the actions
    come from it instead (``act`` is not used): the same draws, all T steps' at once,
    around the mean in numpy (`telapa.rl.host_policy.HostActions`), so the actions are
    the jitted act's to float32 rounding. Without ``features`` the results keep no
    per-step features (0 steps); with ``feature_steps`` those of the first
    ``feature_steps`` steps, and the env computes no sketch after them (its running
    inputs are kept, so returns and lengths are the same)."""
    size = int(len(keys))
    n = size * episodes
    if env.num_envs != n:
        raise ValueError(f"evaluate_native: {size} sets x {episodes} episodes need "
                         f"{n} envs, got {env.num_envs}")
    split = jax.vmap(jax.random.split)(keys)
    seeds = np.asarray(jax.vmap(lambda k: jax.random.randint(k, (), 0, 2**31 - 1))(
        split[:, 0]), np.int64)
    every = np.arange(n)
    obs = env.reset_envs(every, seeds=np.repeat(seeds, episodes) + np.tile(
        np.arange(episodes), size)).astype(np.float32)
    returns, lengths = np.zeros(n), np.zeros(n, np.int32)
    horizon = max(max_steps, env.spec.max_steps) if features else 0
    if feature_steps is not None:
        horizon = min(horizon, check_positive("feature_steps", feature_steps))
    sketching = env.sketch
    steps = np.zeros((n, horizon, env.spec.feature_dim), np.float32)
    running = np.ones(n, bool)
    actions = _set_actions(act, host, params, split[:, 1])
    t = 0
    try:
        while running.any():
            action = actions({"obs": obs.reshape(size, episodes, -1)}, t).reshape(n, -1)
            env.sketch = sketching and t < horizon  # every running episode is at step t
            t += 1
            idx = every[running]
            next_obs, reward, terminated, truncated, feats = env.advance(idx, action[idx])
            obs[idx] = next_obs
            returns[idx] += reward
            if t <= horizon:
                steps[idx, lengths[idx]] = feats
            lengths[idx] += 1
            running[idx[terminated | truncated]] = False
    finally:
        env.sketch = sketching
    if features:
        steps = steps[:, :min(horizon, max(max_steps, int(lengths.max())))]
    shape = (size, episodes)
    returns, lengths = returns.astype(np.float32).reshape(shape), lengths.reshape(shape)
    steps = steps.reshape(*shape, *steps.shape[1:])
    return [EvalResult(returns[i], lengths[i], steps[i], competence) for i in range(size)]
