"""JAX's persistent compilation cache, shared by every telapa process.

A continual run compiles one PPO loop and one evaluator per task; with the cache, later
runs (other methods, seeds, resumes) load them from disk instead of recompiling. The
cache holds XLA executables keyed by their program, so results do not depend on it.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax

ENV_VAR = "TELAPA_JAX_CACHE"


def enable_persistent_cache(path: str | Path | None = None) -> Path | None:
    """Caches compiled programs under ``path`` (default ``$TELAPA_JAX_CACHE`` or
    ``~/.cache/telapa/jax``; ``TELAPA_JAX_CACHE=off`` disables). Returns the folder used."""
    setting = str(path) if path is not None else os.environ.get(ENV_VAR, "")
    if setting.lower() in ("off", "0", "none"):
        return None
    folder = Path(setting or Path.home() / ".cache" / "telapa" / "jax").expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    return folder
