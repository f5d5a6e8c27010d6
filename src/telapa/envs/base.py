"""The functional environment interface shared by every backend.

A `JaxEnv` is a pure, jittable, vmappable environment in the style of gymnax:

    state, obs = env.reset(key)
    state, obs, reward, terminated, truncated, info = env.step(state, action)

`step` never resets; `AutoReset` steps a batch of envs that reset as episodes
ends. Every step's `info["features"]` holds the D-dimensional behaviour feature vector
of that step (paper App. "Trajectory features", eq. traj_feat_vector), so trajectories
for the latent space are recorded by the same rollouts that train and evaluate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

import jax
import jax.numpy as jnp
from flax import struct

Obs = dict[str, jax.Array]
"""Observations are dicts of arrays; MiniGrid: ``image``, ``direction``, ``mission``."""

Backend = Literal["jax", "gymnasium", "native"]
"""Where an env runs: ``jax`` (a functional `JaxEnv`, compiled with the policy),
``gymnasium`` (host envs through gymnasium's wrappers, `telapa.envs.gym_backend`; the
reference) or ``native`` (host MuJoCo envs stepped as one numpy batch,
`telapa.envs.mujoco.native`); both host backends are `telapa.envs.host.HostVectorEnv`."""


@dataclass(frozen=True)
class ArraySpec:
    """Shape and dtype of one observation entry (without batch dimensions).

    ``levels`` marks an entry of integer codes: element ``i`` along the last axis takes
    values ``0 .. levels[i] - 1`` (a scalar entry has one level count), and ``-1`` means
    "none". Networks one-hot small code entries and feed grids of codes as the network
    config says (`telapa.rl.networks.Encoder`); ``None``: real-valued."""

    shape: tuple[int, ...]
    dtype: Any
    levels: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.levels is not None:
            width = self.shape[-1] if self.shape else 1
            if len(self.levels) != width or min(self.levels) < 1:
                raise ValueError(f"levels {self.levels} do not fit shape {self.shape}: one "
                                 "positive count per element of the last axis")


@dataclass(frozen=True)
class EnvSpec:
    """Static description of an environment: what a policy network needs to know.

    Exactly one of ``n_actions`` (discrete) or ``action_dim`` (continuous, actions in
    ``[action_low, action_high]``) is set.
    """

    env_id: str
    observation: dict[str, ArraySpec]
    n_actions: int | None = None
    action_dim: int | None = None
    action_low: float = -1.0
    action_high: float = 1.0
    max_steps: int = 0
    feature_dim: int = 0

    @property
    def discrete(self) -> bool:
        return self.n_actions is not None


class JaxEnv(Protocol):
    """A functional environment; see the module docstring."""

    spec: EnvSpec

    def reset(self, key: jax.Array) -> tuple[Any, Obs]: ...

    def step(
        self, state: Any, action: jax.Array
    ) -> tuple[Any, Obs, jax.Array, jax.Array, jax.Array, dict[str, jax.Array]]: ...


@struct.dataclass
class AutoResetState:
    env_state: Any
    key: jax.Array


class AutoReset:
    """A batch of ``num_envs`` copies of ``env`` that reset inside `step` when an episode ends.

    ``reset`` and ``step`` work on the whole batch (leading axis ``num_envs``). The
    observation returned for a finished env is the first observation of its new episode;
    the last observation of the finished episode is kept in ``info["final_obs"]`` (for
    bootstrapping on truncation). Reward, termination flags and ``info["features"]``
    belong to the step that ended the episode.

    Fresh levels are drawn only when needed. A per-env reset under ``vmap`` would
    compute a new level for every env at every step (``where`` evaluates both
    branches), which costs more than the step itself for procedurally generated
    levels. Here a step where ``k`` episodes end draws fresh levels in chunks, largest
    first: as many chunks of each of ``chunks`` (default ``num_envs / 2``, ``/ 8`` and
    ``/ 32``) as fit in what is left of ``k``, and enough of the smallest to cover the
    rest. Chunk j of a step (``drawn`` levels drawn before it, ``size`` levels) resets
    with the keys ``split(fold_in(reset_key, drawn), size)`` and is written in place into
    the next ``size`` finished envs (writes past the last one are dropped). Every episode
    starts from its own independent draw of ``env.reset``, so episodes follow the
    generator's distribution exactly and no two envs share a level.

    Trip counts (issue 25). Iteration i of a size's loop is *active* when i is below the
    step's count for that size; an inactive iteration writes nothing and advances nothing,
    so the levels and keys are those of a loop that runs exactly the active iterations,
    whatever the loop's length. Two lengths:

    * ``static``: each loop runs its largest possible count (`max_counts`: ``num_envs //
      size`` for all but the smallest size, then at most ``ceil(size_prev / size)``) and
      every iteration draws its chunk: no control flow depends on the data, and at most
      1.5 x ``num_envs`` levels are drawn per step, in parallel (the accelerators'
      choice, where a data-dependent loop waits for its predicate on every iteration);
    * otherwise each loop runs the largest count over the members of the named ``vmap``
      axes ``batch_axes`` (`step`; ``lax.pmax``), the step's own count alone: skipped
      draws cost nothing (the CPU's choice, where a draw costs more than the step).

    The default is ``static`` except on CPU (`jax.default_backend`). Before issue 25 the
    loops ran each member's own count, which under ``vmap`` became a ``while_loop`` over
    the largest count of any member that selected the whole env state at every
    iteration; a ``vmap`` that does not name its axis in ``batch_axes`` still does that
    (results are the same).
    """

    def __init__(self, env: JaxEnv, num_envs: int, chunks: tuple[int, ...] | None = None,
                 *, static: bool | None = None):
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if chunks is not None and (not chunks or min(chunks) < 1):
            raise ValueError(f"chunks must be sizes >= 1, got {chunks}")
        self.env = env
        self.spec = env.spec
        self.num_envs = num_envs
        sizes = chunks or tuple(max(1, num_envs // d) for d in (2, 8, 32))
        self.chunks = tuple(sorted({min(n, num_envs) for n in sizes}, reverse=True))
        self.static = jax.default_backend() != "cpu" if static is None else static
        self.max_counts = _max_chunk_counts(self.chunks, num_envs)
        """The largest count of each chunk size (the static loops' trip counts)."""
        self._reset = jax.vmap(env.reset)
        self._step = jax.vmap(env.step)

    def reset(self, key: jax.Array) -> tuple[AutoResetState, Obs]:
        key, reset_key = jax.random.split(key)
        env_state, obs = self._reset(jax.random.split(reset_key, self.num_envs))
        return AutoResetState(env_state, key), obs

    def step(self, state: AutoResetState, action: jax.Array, *,
             batch_axes: tuple[str, ...] = ()):
        """One step of every env (see the class docstring); ``batch_axes``: the names of
        the ``vmap`` axes this step runs under."""
        env_state, obs, reward, terminated, truncated, info = self._step(
            state.env_state, action
        )
        done = jnp.logical_or(terminated, truncated)
        key, reset_key = jax.random.split(state.key)
        # The finished envs in order, then an out-of-range index whose writes are dropped.
        (finished,) = jnp.nonzero(
            done, size=self.num_envs + self.chunks[0], fill_value=self.num_envs
        )

        def refill(size: int, count: jax.Array):
            def draw(i: jax.Array, carry: tuple) -> tuple:
                drawn, current = carry
                active = i < count
                targets = jax.lax.dynamic_slice(finished, (drawn,), (size,))
                targets = jnp.where(active, targets, self.num_envs)
                keys = jax.random.split(jax.random.fold_in(reset_key, drawn), size)
                fresh = self._reset(keys)
                current = jax.tree.map(
                    lambda x, new: x.at[targets].set(new, mode="drop"), current, fresh
                )
                return drawn + jnp.where(active, size, 0), current

            return draw

        left, carry = done.sum(), (jnp.int32(0), (env_state, obs))
        for n, (size, most) in enumerate(zip(self.chunks, self.max_counts, strict=True)):
            last = n == len(self.chunks) - 1
            count = (left + size - 1) // size if last else left // size
            if self.static:
                trips = most
            else:
                trips = jax.lax.pmax(count, batch_axes) if batch_axes else count
            carry = jax.lax.fori_loop(0, trips, refill(size, count), carry)
            left = left - count * size
        env_state, next_obs = carry[1]
        info = {**info, "final_obs": obs}
        return AutoResetState(env_state, key), next_obs, reward, terminated, truncated, info


def _max_chunk_counts(chunks: tuple[int, ...], num_envs: int) -> tuple[int, ...]:
    """The largest count of each chunk size (descending ``chunks``) over every number
    k <= ``num_envs`` of finished envs: all but the last take ``left // size`` of what the
    larger sizes left, the last ``ceil(left / size)``."""
    most = []
    for k in range(num_envs + 1):
        left, counts = k, []
        for n, size in enumerate(chunks):
            count = -(-left // size) if n == len(chunks) - 1 else left // size
            counts.append(count)
            left -= count * size
        most = [max(a, b) for a, b in zip(most, counts, strict=True)] if most else counts
    return tuple(most)
