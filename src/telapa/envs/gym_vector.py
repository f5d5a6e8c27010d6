"""The JAX MiniGrid ports as gymnasium environments, for any library.

Importing `telapa.envs` registers every ported id ``<Id>`` (`register_envs`) as
``telapa/<Id>``, e.g. ``telapa/MiniGrid-DoorKey-8x8-v0``::

    env = gymnasium.make("telapa/MiniGrid-DoorKey-8x8-v0")            # one env
    envs = gymnasium.make_vec("telapa/MiniGrid-DoorKey-8x8-v0", num_envs=64)

``make`` gives a `MiniGridEnv`, ``make_vec`` (``vectorization_mode`` ``None`` or
``"vector_entry_point"``) a `MiniGridVectorEnv` that steps the whole batch as one jitted
call. Both speak Farama's interface: the observation space is Farama's own (copied from
the Farama env of the id: ``image`` uint8 ``(7, 7, 3)``, ``direction`` ``Discrete(4)``,
``mission`` Farama's ``MissionSpace``), the mission is Farama's string, the action space
``Discrete(7)``, and rewards, terminations and truncations are Farama's
(tests/envs/test_gym_vector.py compares them step by step from Farama's own states).

**Reward.** ``r = 1 - 0.9 * step_count / max_steps`` (float64, Farama's ``_reward``,
evaluated on the host from the port's success flag and step count) on success, else 0.

**Autoreset** (`MiniGridVectorEnv`): gymnasium's ``NEXT_STEP`` mode, declared in
``metadata["autoreset_mode"]``. A step that ends env i's episode returns its last
observation with the true flags; the next call to ``step`` resets env i instead of
stepping it (its action is ignored) and returns the new episode's first observation with
reward 0 and both flags false. The new level is a fresh draw of the port's generator
(Farama's distribution, not Farama's random stream), drawn inside the jitted step by
`telapa.envs.base.AutoReset` over `_NextStep`, which delays each env's reset by one step.

**Mission** (`mission_text`): Farama's ``mission_space.mission_func`` applied to the
port's mission object (colour and type names) as the space's placeholders ask; leading
placeholders the port's state does not fix (Fetch's five phrasings, ``"get a"`` ...
``"you must fetch a"``) are drawn uniformly per episode on the host, as Farama draws
them, from the env's ``np_random``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from telapa.envs.base import AutoReset, AutoResetState, EnvSpec, Obs
from telapa.envs.minigrid.constants import COLOR_TO_IDX, N_ACTIONS, OBJECT_TO_IDX
from telapa.envs.minigrid.env import MiniGrid
from telapa.envs.minigrid.state import State
from telapa.envs.minigrid.tasks import all_tasks

NAMESPACE = "telapa"
COLOR_NAMES = {i: name for name, i in COLOR_TO_IDX.items()}
OBJECT_NAMES = {i: name for name, i in OBJECT_TO_IDX.items()}
METADATA = {"render_modes": ["rgb_array"], "render_fps": 10}


def farama_id(env_id: str) -> str:
    """``telapa/<Id>`` (or ``<Id>``) -> ``<Id>``, the Farama id the port is of."""
    return env_id.split("/", 1)[1] if env_id.startswith(f"{NAMESPACE}/") else env_id


@functools.cache
def port(env_id: str) -> MiniGrid:
    """The JAX port of ``env_id`` (``telapa/<Id>`` or ``<Id>``) with the mission observed."""
    tasks = all_tasks()
    name = farama_id(env_id)
    if name not in tasks:
        raise gym.error.Error(f"no JAX port of {name!r}; ported: {', '.join(sorted(tasks))}")
    return MiniGrid(tasks[name], observe_mission=True)


@functools.cache
def farama_observation_space(env_id: str) -> gym.spaces.Dict:
    """Farama's ``observation_space`` of ``env_id`` (made once, then closed)."""
    import minigrid  # noqa: F401  (registers the MiniGrid ids)

    env = gym.make(farama_id(env_id))
    try:
        return env.observation_space
    finally:
        env.close()


def mission_text(space: gym.spaces.Dict, mission: np.ndarray, rng: np.random.Generator) -> str:
    """Farama's mission string for the port's mission ``(colour, type)`` indices.

    ``mission_func(*free, colour, type)`` when the space has >= 2 placeholders (``free``:
    the leading ones, each drawn uniformly by ``rng``), ``mission_func(colour)`` for one,
    ``mission_func()`` for none (see the module docstring)."""
    mission_space = space["mission"]
    holders = list(mission_space.ordered_placeholders or [])
    named = [COLOR_NAMES[int(mission[0])], OBJECT_NAMES[int(mission[1])]][: len(holders)]
    free = [h[int(rng.integers(len(h)))] for h in holders[: len(holders) - len(named)]]
    return mission_space.mission_func(*free, *named)


def farama_reward(success: np.ndarray, step_count: np.ndarray, max_steps: np.ndarray
                  ) -> np.ndarray:
    """Farama's ``_reward`` where ``success``, else 0: float64, bit for bit Farama's."""
    with np.errstate(divide="ignore", invalid="ignore"):  # max_steps 0: a reset's dummy
        return np.where(success, 1 - 0.9 * (step_count / max_steps), 0.0)


def check_num_envs(env_id: str, num_envs: Any) -> int:
    """``num_envs`` as an int, or a ValueError naming ``env_id`` and the value: a count,
    so an integer >= 1, not a bool, a float (``2.0``) or a string (``"2"``), the message
    of `telapa.envs.mujoco.native.NativeVectorEnv`."""
    if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) \
            or num_envs < 1:
        raise ValueError(f"{env_id}: num_envs must be an integer >= 1, got {num_envs!r}")
    return int(num_envs)


def _is_seed(seed: Any) -> bool:
    return not isinstance(seed, bool) and isinstance(seed, (int, np.integer)) and seed >= 0


def check_seed(env_id: str, seed: Any, num_envs: int) -> int | list[int | None] | None:
    """``reset(seed=)`` in the forms gymnasium's ``SyncVectorEnv`` takes: None, one
    integer, or a sequence of ``num_envs`` entries, each an integer or None (env i's own
    seed; None: that env is not reseeded). Integers are >= 0, of any size, as gymnasium's
    seeding takes them (`seed_key` keeps all of a large one); anything else is a
    ValueError naming ``env_id`` and the value."""
    if seed is None or _is_seed(seed):
        return None if seed is None else int(seed)
    form = ("seed must be an integer >= 0, a sequence of num_envs such integers or None "
            "entries, or None")
    if isinstance(seed, (str, bytes)) or not isinstance(seed, (Sequence, np.ndarray)):
        raise ValueError(f"{env_id}: {form}; got {seed!r}")
    seeds = list(seed)
    if len(seeds) != num_envs:
        raise ValueError(f"{env_id}: {len(seeds)} seeds for {num_envs} envs")
    bad = [s for s in seeds if s is not None and not _is_seed(s)]
    if bad:
        raise ValueError(f"{env_id}: {form}; got the entries {bad!r}")
    return [None if s is None else int(s) for s in seeds]


def seed_key(seed: int) -> jax.Array:
    """The batch key of ``reset(seed=seed)`` (`MiniGridVectorEnv.reset`), from the whole
    integer: ``jax.random.PRNGKey(seed)`` for ``seed < 2**32`` (the keys those seeds have
    always had), and for a larger seed ``PRNGKey`` of its low 32-bit word with each higher
    word folded in (``jax.random.fold_in``), low to high. ``PRNGKey`` alone (jax without
    64-bit integers) keeps only the low 32 bits, so that 0 and ``2**32`` gave the same
    levels, and raises ``OverflowError`` from ``2**63``; gymnasium's seeding, the single
    env's, takes any integer >= 0 and tells those seeds apart."""
    seed = int(seed)
    key = jax.random.PRNGKey(seed & 0xFFFFFFFF)
    seed >>= 32
    while seed:
        key = jax.random.fold_in(key, seed & 0xFFFFFFFF)
        seed >>= 32
    return key


def reset_mask(env_id: str, options: dict[str, Any] | None, num_envs: int
               ) -> np.ndarray | None:
    """``options["reset_mask"]`` (a copy), or None without one. Checked as gymnasium's
    ``SyncVectorEnv.reset`` checks it, with its exception types (TypeError: not a numpy
    array, or not ``np.bool_``; ValueError: not of shape ``(num_envs,)``, or no True), the
    messages naming ``env_id``. Unlike ``SyncVectorEnv``, the caller's ``options`` is
    left as it is (``SyncVectorEnv`` pops the mask out of it, so reusing the dict resets
    every env the second time)."""
    if not options or "reset_mask" not in options:
        return None
    mask = options["reset_mask"]
    name = f"{env_id}: options['reset_mask']"
    if not isinstance(mask, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, got {type(mask).__name__}")
    if mask.shape != (num_envs,):
        raise ValueError(f"{name} must have shape ({num_envs},), got {mask.shape}")
    if mask.dtype != np.bool_:
        raise TypeError(f"{name} must have dtype np.bool_, got {mask.dtype}")
    if not mask.any():
        raise ValueError(f"{name} must have at least one True value, got {mask}")
    return mask.copy()


def check_actions(env_id: str, actions: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``actions`` as int32 of ``shape`` (``()``: one env's), checked on the host before
    the jitted step, which would take any integer (7 and -1 as a no-op) and truncate a
    float: a ValueError naming ``env_id``, the bad values and the range where an action
    is not one of Farama's ``Discrete(7)`` (Farama's env raises ``ValueError: Unknown
    action``). Integers of any dtype are actions, and floats with an integer value (2.0,
    as Farama's ``action == Actions.forward`` takes it); booleans, strings and floats such
    as 1.7 are not. A few numpy operations on the batch: cheap beside the step."""
    a = np.asarray(actions)
    size = int(np.prod(shape))
    if a.size != size:
        raise ValueError(f"{env_id}: expected {size} action{'s' * (size != 1)}, got an "
                         f"array of shape {a.shape}")
    a = a.reshape(shape)
    if a.dtype.kind not in "iuf":
        raise ValueError(f"{env_id}: actions are integers 0 to {N_ACTIONS - 1} "
                         f"(Discrete({N_ACTIONS})), got dtype {a.dtype}: {a!r}")
    bad = (a < 0) | (a >= N_ACTIONS)
    if a.dtype.kind == "f":
        bad |= a != np.floor(a)  # NaN too
    if bad.any():
        values = np.unique(a[bad]).tolist()
        listed = ", ".join(repr(v) for v in values[:8]) + (", ..." if len(values) > 8 else "")
        raise ValueError(f"{env_id}: unknown action{'s' * (len(values) > 1)} {listed}: "
                         f"actions are integers 0 to "
                         f"{N_ACTIONS - 1} (Discrete({N_ACTIONS}))")
    return a.astype(np.int32)


@struct.dataclass
class Slot:
    """One env of `_NextStep`: the port's state and whether its episode ended last step."""

    state: State
    ended: jax.Array


class _NextStep:
    """A `JaxEnv` whose episodes end one step late, so that `AutoReset` resets with
    gymnasium's ``NEXT_STEP`` timing (see the module docstring).

    ``step`` of a slot whose episode ended at the previous step keeps it as is and
    signals ``terminated`` (AutoReset's reset trigger); any other slot steps the port and
    records in ``ended`` whether the episode ended. The true step's outcome is in
    ``info``: ``terminated``, ``truncated``, ``success`` (all false for a slot that ended
    at the previous step), ``step_count`` and ``max_steps``."""

    def __init__(self, env: MiniGrid):
        self.env = env
        self.spec: EnvSpec = env.spec

    def reset(self, key: jax.Array) -> tuple[Slot, Obs]:
        state, obs = self.env.reset(key)
        return Slot(state, jnp.bool_(False)), obs

    def step(self, slot: Slot, action: jax.Array):
        state, obs, reward, terminated, truncated, info = self.env.step(slot.state, action)
        ended = slot.ended
        state = jax.tree.map(lambda old, new: jnp.where(ended, old, new), slot.state, state)
        live = ~ended
        info = {"terminated": terminated & live, "truncated": truncated & live,
                "success": info["success"] & live, "step_count": state.step_count,
                "max_steps": state.max_steps}
        return (Slot(state, (terminated | truncated) & live), obs, reward, ended,
                jnp.bool_(False), info)


@functools.cache
def _batched(env_id: str, num_envs: int, chunks: tuple[int, ...] | None = None):
    """The jitted ``step(state, actions)`` of ``num_envs`` slots and its first state,
    shared by every vector env of that id, size and ``chunks`` (`AutoReset`'s).

    ``reset`` is a step from `blank_states` slots marked ended: every env resets, so one
    program serves both (compiling the port's generator once per chunk size)."""
    auto = AutoReset(_NextStep(port(env_id)), num_envs, chunks)

    @jax.jit
    def step(state: AutoResetState, actions: jax.Array):
        state, obs, _, _, _, info = auto.step(state, actions)
        return state, obs, {k: v for k, v in info.items() if k != "final_obs"}

    return step, blank_states(auto.env, num_envs).replace(ended=np.ones(num_envs, bool))


def blank_states(env: Any, num_envs: int) -> Any:
    """``num_envs`` states of ``env`` (a `JaxEnv`) with every entry zero, as numpy: a
    port `State` there has ``max_steps`` 0, so its next step ends its episode."""
    keys = jax.random.split(jax.random.PRNGKey(0), num_envs)
    shapes = jax.eval_shape(jax.vmap(env.reset), keys)[0]
    return jax.tree.map(lambda x: np.zeros(x.shape, x.dtype), shapes)


@functools.cache
def _single(env_id: str):
    """The jitted ``reset`` and ``step`` of one port, shared by every `MiniGridEnv` of
    ``env_id`` (a ``SyncVectorEnv`` of them compiles once)."""
    return jax.jit(port(env_id).reset), jax.jit(port(env_id).step)


@functools.cache
def _observe(env_id: str):
    """The jitted observation of a batch of port states (the envs a ``reset_mask``
    leaves: a slot keeps the state its last observation was made of, its final state if
    its episode ended)."""
    return jax.jit(jax.vmap(port(env_id).observe))


def _where(rows: np.ndarray, new: Any, old: Any) -> Any:
    """``new`` in the ``rows`` (a bool mask of the leading axis), ``old`` elsewhere, leaf by
    leaf of two pytrees, as numpy."""
    return jax.tree.map(
        lambda a, b: np.where(rows.reshape(-1, *[1] * (np.ndim(a) - 1)), a, b), new, old)


def _scatter(rows: np.ndarray, blank: np.ndarray, part: np.ndarray) -> np.ndarray:
    """A copy of ``blank`` with ``part`` in the ``rows`` (indices of its leading axis)."""
    out = np.array(blank)
    out[rows] = part
    return out


def _render(env: MiniGrid, states: State) -> np.ndarray:
    from telapa.envs.minigrid.render import render

    return np.asarray(render(states, see_through_walls=env.task.see_through_walls))


def _check_render_mode(render_mode: str | None) -> str | None:
    if render_mode not in (None, *METADATA["render_modes"]):
        raise gym.error.Error(f"render_mode {render_mode!r}: only 'rgb_array' is supported")
    return render_mode


class MiniGridEnv(gym.Env):
    """One ported env with Farama's interface (module docstring); no autoreset."""

    metadata = METADATA

    def __init__(self, env_id: str, *, render_mode: str | None = None):
        self.env_id = farama_id(env_id)
        self.port = port(env_id)
        self.render_mode = _check_render_mode(render_mode)
        self.observation_space = farama_observation_space(env_id)
        self.action_space = gym.spaces.Discrete(N_ACTIONS)
        self._reset, self._step = _single(self.env_id)
        self._state: State | None = None
        self._mission = ""

    def __getstate__(self) -> dict[str, Any]:
        """Picklable: without the jitted functions and the port, which `__setstate__`
        takes from the process's caches again."""
        return {k: v for k, v in self.__dict__.items()
                if k not in ("port", "_reset", "_step")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.port = port(self.env_id)
        self._reset, self._step = _single(self.env_id)

    def _obs(self, obs: Obs) -> dict[str, Any]:
        return {"direction": int(obs["direction"]), "image": np.array(obs["image"]),
                "mission": self._mission}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        key = jax.random.PRNGKey(int(self.np_random.integers(2**31)))
        self._state, obs = self._reset(key)
        self._mission = mission_text(self.observation_space, np.asarray(obs["mission"]),
                                     self.np_random)
        return self._obs(obs), {}

    def set_state(self, state: State, mission: str) -> None:
        """Continues from ``state`` (e.g. `telapa.envs.minigrid.from_farama` of a live
        Farama env) with the mission string ``mission``."""
        self._state, self._mission = state, mission

    def step(self, action: Any):
        """One step; an action that is not one of ``Discrete(7)``'s is a ValueError
        (`check_actions`), as Farama's env raises."""
        if self._state is None:
            raise gym.error.ResetNeeded("call reset before step")
        action = check_actions(self.env_id, action, ())
        self._state, obs, _, terminated, truncated, info = self._step(self._state, action)
        reward = farama_reward(bool(info["success"]), int(self._state.step_count),
                               int(self._state.max_steps))
        return self._obs(obs), float(reward), bool(terminated), bool(truncated), {}

    def render(self) -> np.ndarray | None:
        if self.render_mode is None or self._state is None:
            return None
        return _render(self.port, self._state)


class MiniGridVectorEnv(VectorEnv):
    """``num_envs`` ported envs stepped as one jitted call, with gymnasium's
    ``NEXT_STEP`` autoreset (module docstring). Observations are batched as
    ``gymnasium.vector.SyncVectorEnv`` batches Farama's: ``image`` uint8 ``(n, 7, 7, 3)``,
    ``direction`` int64 ``(n,)``, ``mission`` a tuple of n strings; rewards float64,
    flags bool, infos ``{}``. Actions are checked on the host (`check_actions`): one not
    of ``Discrete(7)`` is a ValueError, as Farama's env raises.

    ``reset`` (its docstring) takes gymnasium's seeds and ``options["reset_mask"]``.
    ``chunks``: `AutoReset`'s chunk sizes, default one size, ``num_envs // 8``, so that
    the port's generator is compiled once."""

    metadata = {**METADATA, "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, env_id: str, num_envs: int = 1, *, render_mode: str | None = None,
                 chunks: tuple[int, ...] | None = None):
        self.env_id = farama_id(env_id)
        self.port = port(env_id)
        self.num_envs = num_envs = check_num_envs(self.env_id, num_envs)
        self.render_mode = _check_render_mode(render_mode)
        self.single_observation_space = farama_observation_space(env_id)
        self.single_action_space = gym.spaces.Discrete(N_ACTIONS)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.chunks = (max(1, num_envs // 8),) if chunks is None else tuple(chunks)
        self._jit_step, self._ended_slots = _batched(self.env_id, num_envs, self.chunks)
        self._state: AutoResetState | None = None
        self._missions = [""] * num_envs
        self._ended = np.zeros(num_envs, bool)

    def __getstate__(self) -> dict[str, Any]:
        """Picklable: without the jitted step and the port, which `__setstate__` takes
        from the process's caches again (the jitted step is a closure, which ``pickle``
        cannot save)."""
        return {k: v for k, v in self.__dict__.items()
                if k not in ("port", "_jit_step", "_ended_slots")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.port = port(self.env_id)
        self._jit_step, self._ended_slots = _batched(self.env_id, self.num_envs,
                                                     self.chunks)

    def _obs(self, obs: Obs) -> dict[str, Any]:
        return {"direction": np.array(obs["direction"], np.int64),
                "image": np.array(obs["image"]), "mission": tuple(self._missions)}

    def _new_missions(self, missions: np.ndarray, which: np.ndarray, *,
                      every: bool = False) -> None:
        """The mission strings of the envs of ``which`` from their ``missions`` objects,
        phrasings drawn from ``np_random`` in env order; ``every``: drawn for every env
        and kept for those of ``which``, as a reset of every env draws them (a masked
        reset then gives each of its envs the full reset's phrasing, and leaves
        ``np_random`` where the full reset leaves it)."""
        space = self.single_observation_space
        for i in range(self.num_envs) if every else np.flatnonzero(which):
            text = mission_text(space, missions[i], self.np_random)
            if which[i]:
                self._missions[i] = text

    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None):
        """New episodes, in every env or in those of ``options["reset_mask"]``.

        ``seed``, in gymnasium's forms (`check_seed`):

        - an integer s: the levels are drawn from the one key `seed_key` (s) of the batch
          (``PRNGKey(s)`` for s < 2**32; its `AutoReset` draw, the program of every later
          autoreset) and ``np_random`` is reseeded with s (the missions' phrasings, drawn
          for every env in turn); ``None``: that key from a seed drawn from
          ``np_random``;
        - one entry per env: env i starts as ``gymnasium.make("telapa/<Id>")`` does at
          ``reset(seed=seed[i])`` (its level from the key that ``np_random(seed[i])``
          draws, then its phrasing from that generator; a None entry draws both from the
          vector env's ``np_random``). The key of later autoresets is drawn from
          ``np_random``, reseeded first from the seeds of the envs reset when none is
          None: such a run is reproducible from its seeds.

        ``options["reset_mask"]`` (checked as ``SyncVectorEnv`` checks it: `reset_mask`)
        resets only the envs where it is True, as ``SyncVectorEnv`` does: each of them
        starts what a reset of every env with the same seed would start there, and is no
        longer due to autoreset; every other env keeps its state, mission and pending
        autoreset (one whose episode ended at the last step still resets at the next), and
        its observation is its last one. A mask needs a reset of every env before it.
        Other options are ignored, as Farama's envs ignore them."""
        seed = check_seed(self.env_id, seed, self.num_envs)
        mask = reset_mask(self.env_id, options, self.num_envs)
        if mask is not None and self._state is None:
            raise gym.error.ResetNeeded(f"{self.env_id}: call reset() without a reset_mask "
                                        "before resetting some envs")
        which = np.ones(self.num_envs, bool) if mask is None else mask
        if isinstance(seed, list):
            slots, obs, key = self._seeded_episodes(seed, which)
        else:
            slots, obs, key = self._drawn_episodes(seed, which)
        if mask is not None:  # the other envs as they are
            old = jax.device_get(self._state.env_state)
            slots = _where(mask, slots, old)
            last = jax.device_get(_observe(self.env_id)(old.state))
            obs = _where(mask, obs, {k: last[k] for k in ("image", "direction")})
        self._state = AutoResetState(slots, key)
        self._ended = np.array(slots.ended, bool)
        return self._obs(obs), {}

    def _drawn_episodes(self, seed: int | None, which: np.ndarray):
        """Slots, observations and next key of a reset of every env from `seed_key`
        (``seed``) (`reset`), a step of the batched program from slots that all ended; the
        mission strings of the envs of ``which``, the phrasings drawn for every env as a
        full reset draws them (`_new_missions`)."""
        if seed is not None:
            self._np_random, self._np_random_seed = gym.utils.seeding.np_random(seed)
        else:
            seed = int(self.np_random.integers(2**31))
        blank = AutoResetState(self._ended_slots, seed_key(seed))
        state, obs, _ = self._jit_step(blank, jnp.zeros(self.num_envs, jnp.int32))
        obs = jax.device_get({"image": obs["image"], "direction": obs["direction"],
                              "mission": obs["mission"]})
        self._new_missions(np.asarray(obs.pop("mission")), which, every=True)
        return jax.device_get(state.env_state), obs, state.key

    def _seeded_episodes(self, seeds: list[int | None], which: np.ndarray):
        """Slots, observations and next key of the envs of ``which`` started from their own
        ``seeds`` (`reset`) by the single env's jitted reset; the other rows are
        `blank_states`' (`reset` keeps those envs' own)."""
        reset_one = _single(self.env_id)[0]
        rows = np.flatnonzero(which)
        started = []
        for i in rows:
            rng = (self.np_random if seeds[i] is None
                   else gym.utils.seeding.np_random(seeds[i])[0])
            state, obs = jax.device_get(reset_one(jax.random.PRNGKey(int(rng.integers(2**31)))))
            self._missions[i] = mission_text(self.single_observation_space, obs["mission"], rng)
            started.append((state, {"image": obs["image"], "direction": obs["direction"]}))
        state, obs = jax.tree.map(lambda *x: np.stack(x), *started)
        blank = self._ended_slots.state, {
            "image": np.zeros((self.num_envs, *obs["image"].shape[1:]), np.uint8),
            "direction": np.zeros(self.num_envs, np.int32)}
        state, obs = jax.tree.map(lambda b, x: _scatter(rows, b, x), blank, (state, obs))
        slots = Slot(state, np.zeros(self.num_envs, bool))
        chosen = [seeds[i] for i in rows]
        if None not in chosen:
            self.np_random = np.random.Generator(np.random.PCG64(np.random.SeedSequence(chosen)))
        return slots, obs, jax.random.PRNGKey(int(self.np_random.integers(2**31)))

    def set_state(self, states: State | Sequence[State], missions: Sequence[str], *,
                  ended: np.ndarray | None = None) -> None:
        """Continues every env from ``states`` with ``missions`` (n strings); the envs
        where ``ended`` (default none) reset at the next step. ``states``: one port
        `State` batched over the n envs (every leaf with leading axis n, e.g.
        ``jax.tree.map(lambda *x: np.stack(x), *per_env)``), or a sequence of n per-env
        states (e.g. `telapa.envs.minigrid.from_farama` of each of n live Farama envs),
        stacked here. Shapes are checked against the port's (a mismatch would fail only
        inside the next jitted step): a ValueError naming the env id and the leaf."""
        n = self.num_envs
        if isinstance(states, (list, tuple)):
            if len(states) != n:
                raise ValueError(f"{self.env_id}: set_state got {len(states)} states for "
                                 f"{n} envs")
            try:
                states = jax.tree.map(lambda *x: np.stack(x), *states)
            except (TypeError, ValueError) as err:
                raise ValueError(f"{self.env_id}: set_state: the {n} states are not port "
                                 f"States of one shape ({err})") from None
        want = self._ended_slots.state
        if jax.tree.structure(states) != jax.tree.structure(want):
            raise ValueError(f"{self.env_id}: set_state takes a port State batched over the "
                             f"{n} envs, or a sequence of {n} States; got "
                             f"{type(states).__name__}")
        paths = jax.tree_util.tree_flatten_with_path(want)[0]
        for (path, w), got in zip(paths, jax.tree.leaves(states), strict=True):
            if np.shape(got) != w.shape:
                raise ValueError(
                    f"{self.env_id}: set_state: states{jax.tree_util.keystr(path)} has shape "
                    f"{np.shape(got)}, expected {w.shape} (one State batched over the {n} "
                    f"envs, or a sequence of {n} States)")
        missions = list(missions)
        if len(missions) != n:
            raise ValueError(f"{self.env_id}: set_state got {len(missions)} missions for "
                             f"{n} envs")
        ended = np.zeros(n, bool) if ended is None else np.asarray(ended, bool)
        if ended.shape != (n,):
            raise ValueError(f"{self.env_id}: set_state: ended must have shape ({n},), got "
                             f"{ended.shape}")
        key = jax.random.PRNGKey(int(self.np_random.integers(2**31)))
        self._state = AutoResetState(Slot(states, jnp.asarray(ended)), key)
        self._missions, self._ended = missions, ended.copy()

    def step(self, actions: Any):
        if self._state is None:
            raise gym.error.ResetNeeded("call reset before step")
        actions = jnp.asarray(check_actions(self.env_id, actions, (self.num_envs,)))
        self._state, obs, info = self._jit_step(self._state, actions)
        info = jax.device_get(info)
        self._new_missions(np.asarray(obs["mission"]), self._ended)
        terminated, truncated = info["terminated"], info["truncated"]
        reward = farama_reward(info["success"], info["step_count"], info["max_steps"])
        self._ended = terminated | truncated
        return self._obs(obs), reward, terminated, truncated, {}

    def render(self) -> tuple[np.ndarray, ...] | None:
        """Each env's ``rgb_array`` frame, as ``SyncVectorEnv.render`` returns them."""
        if self.render_mode is None or self._state is None:
            return None
        return tuple(_render(self.port, self._state.env_state.state))

    def close_extras(self, **kwargs: Any) -> None:
        self._state = None


def register_ids(names: list[str] | tuple[str, ...], *, entry_point: str,
                 vector_entry_point: str) -> list[str]:
    """Registers ``telapa/<Id>`` for each ``<Id>`` of ``names`` not yet registered, with
    the two entry points (``"module:name"``, given ``env_id=<Id>``); returns all of them."""
    ids = []
    for name in names:
        env_id = f"{NAMESPACE}/{name}"
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=entry_point,
                         vector_entry_point=vector_entry_point, kwargs={"env_id": name})
        ids.append(env_id)
    return ids


def register_envs() -> list[str]:
    """Registers ``telapa/<Id>`` for every ported ``<Id>`` not yet registered; returns
    all of them. No ``max_episode_steps``: like Farama's, the envs truncate at their own
    ``max_steps``."""
    return register_ids(sorted(all_tasks()), entry_point=f"{__name__}:MiniGridEnv",
                        vector_entry_point=f"{__name__}:MiniGridVectorEnv")


__all__ = ["MiniGridEnv", "MiniGridVectorEnv", "blank_states", "check_actions",
           "check_num_envs", "check_seed", "farama_observation_space", "farama_reward",
           "mission_text", "port", "register_envs", "register_ids", "reset_mask",
           "seed_key"]
