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

import warnings
from pathlib import Path

import jax

from telapa import envvars
from telapa.config import ConfigError

ENV_VAR = envvars.JAX_CACHE


def enable_persistent_cache(path: str | Path | None = None) -> Path | None:
    """Caches compiled programs under ``path`` (default ``$TELAPA_JAX_CACHE`` or
    ``~/.cache/telapa/jax``; ``TELAPA_JAX_CACHE=off`` disables). Returns the folder used.

    A folder that cannot be made is a `ConfigError` naming it, and the variable where it
    came from ``$TELAPA_JAX_CACHE``; where the default cannot be made (a read-only home),
    a warning says so and nothing is cached (returns None): the cache saves time and
    changes no result."""
    setting = str(path) if path is not None else envvars.jax_cache() or ""
    if setting.lower() in envvars.CACHE_OFF:
        return None
    folder = Path(setting or Path.home() / ".cache" / "telapa" / "jax").expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        reason = err.strerror or str(err)
        if not setting:
            warnings.warn(f"JAX's compilation cache is off: cannot make {folder} ({reason}); "
                          f"set {ENV_VAR} to a writable folder", RuntimeWarning, stacklevel=2)
            return None
        where = f"{ENV_VAR}={setting!r}" if path is None else repr(setting)
        raise ConfigError(f"{where}: cannot make the compilation cache folder {folder} "
                          f"({reason})") from err
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return folder
