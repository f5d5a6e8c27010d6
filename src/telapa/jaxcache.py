"""JAX's persistent compilation cache, shared by every telapa process.

A continual run compiles one PPO loop and one evaluator per task; with the cache, later
runs (other methods, seeds, resumes) load them from disk instead of recompiling. The
cache holds XLA executables keyed by their program, so results do not depend on it.

Every program is cached, however fast it compiles: a TeLAPA run also compiles a few
hundred small programs (about 0.1 s each on 2 CPU cores), which JAX's default threshold
of 1 s (or 0.5 s) leaves out, so every new process (a resume, a sweep worker, a test
worker) compiled them again: 82 s against 47 s for a tiny MuJoCo TeLAPA run in a fresh
process on a warm cache (tests/continual/test_mujoco_run.py's, 2-core CPU under load).
A lookup costs about a tenth of such a compile.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax

from telapa import envvars

ENV_VAR = envvars.JAX_CACHE


def enable_persistent_cache(path: str | Path | None = None) -> Path | None:
    """Caches compiled programs under ``path`` (default ``$TELAPA_JAX_CACHE`` or
    ``~/.cache/telapa/jax``; ``TELAPA_JAX_CACHE=off`` disables). Returns the folder used."""
    setting = str(path) if path is not None else os.environ.get(ENV_VAR, "")
    if setting.lower() in ("off", "0", "none"):
        return None
    folder = Path(setting or Path.home() / ".cache" / "telapa" / "jax").expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return folder
