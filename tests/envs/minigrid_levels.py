"""Freshly generated MiniGrid levels, from the port and from Farama, as batched `State`s.

`port_levels` runs a generator over ``n`` keys in one jitted ``vmap``; `farama_levels`
resets a Farama env with seeds ``0 .. n-1`` and reads each level with `from_farama`.
Both return a `State` whose leaves are numpy arrays with a leading level axis, cached
per id for the process.

Farama's levels (about 5 s per id: 2,000 resets in Python) are also computed only once
per test session when xdist runs several workers: `share_between_workers` (called by
``tests/envs/conftest.py`` in each worker) names a folder of the session's temporary
directory; the first worker to need an id computes it under an exclusive lock on that
id's lock file and writes it there atomically, and the others wait for the lock and
read the file. The file holds exactly what `farama_levels` would compute (the same
seeds, this session's `from_farama`), so every check that uses it is unchanged.
"""

from __future__ import annotations

import fcntl
import functools
import os
import pickle
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import gymnasium as gym
import jax
import minigrid  # noqa: F401  (registers the Farama ids)
import numpy as np

from telapa.envs.minigrid import State, all_tasks, from_farama

N_LEVELS = 2000
PORT_SEED = 20240611

Generator = Callable[[jax.Array], State]

_shared_folder: Path | None = None
"""Where `farama_levels` shares its levels with the other workers (None: not shared)."""


def share_between_workers(folder: Path | None) -> None:
    """Share `farama_levels` through ``folder`` (one per test session), or stop (None)."""
    global _shared_folder
    _shared_folder = folder


def generate_levels(generate: Generator, n: int = N_LEVELS, seed: int = PORT_SEED) -> State:
    """``generate`` (e.g. `Task.generate`) over ``n`` keys, as numpy."""
    keys = jax.random.split(jax.random.PRNGKey(seed), n)
    return jax.device_get(jax.jit(jax.vmap(generate))(keys))


@functools.cache
def port_levels(env_id: str) -> State:
    """`N_LEVELS` levels of the port of ``env_id``."""
    return generate_levels(all_tasks()[env_id].generate)


def read_farama_levels(env_id: str, n: int = N_LEVELS) -> State:
    """``n`` levels of Farama's ``env_id``, reset with seeds ``0 .. n - 1``."""
    env = gym.make(env_id)
    levels = []
    for seed in range(n):
        env.reset(seed=seed)
        levels.append(jax.device_get(from_farama(env)))
    env.close()
    return jax.tree.map(lambda *leaves: np.stack(leaves), *levels)


def computed_once(folder: Path, name: str, compute: Callable[[], object]) -> object:
    """``compute()``, stored as ``folder/name.pkl`` by the first process to ask for it
    (under an exclusive `fcntl.flock` on ``name.lock``, written to a temporary file and
    renamed) and read from there by every later one."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.pkl"
    with open(folder / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            return pickle.loads(path.read_bytes())
        value = compute()
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(pickle.dumps(value))
        partial.replace(path)
        return value


@functools.cache
def farama_levels(env_id: str) -> State:
    """`N_LEVELS` levels of Farama's ``env_id``, reset with seeds ``0 .. N_LEVELS - 1``
    (`read_farama_levels`; shared between workers, see the module docstring)."""
    if _shared_folder is None:
        return read_farama_levels(env_id)
    name = (f"{env_id}-n{N_LEVELS}-minigrid{version('minigrid')}"
            f"-gymnasium{version('gymnasium')}")
    return computed_once(_shared_folder, name, lambda: read_farama_levels(env_id))
