"""The environment variables telapa reads, each read and checked here: a variable that is
set to a value telapa cannot use is a `ConfigError` that names it and its value
(``TELAPA_THREADS='two': must be an integer >= 1``), never a bare ``ValueError`` from deep
inside a run or a sweep's worker; and `check` reads them all, so that ``telapa`` stops on
a bad one before any work (`telapa.cli.main`), where a sweep's workers and a Slurm job
would have met it later, one cell at a time.

Each, with its value when unset:

- ``TELAPA_LOG_INTERVAL``: seconds between a sweep cell's progress lines
  (``DIR/status/NAME.log``); 30.
- ``TELAPA_SLURM_POLL_S``: seconds between a Slurm sweep's polls of its tasks; 5.
- ``TELAPA_SLURM_RESULT_WAIT_S``: seconds a Slurm sweep waits for the result file of a
  task that ended without one; 30.
- ``TELAPA_THREADS``: threads that step a native MuJoCo batch (a sweep worker sets its
  ``--threads``); the cores.
- ``TELAPA_FSYNC``: ``on`` or ``off`` (``1``/``0``, ``true``/``false``, ``yes``/``no``),
  whether each atomic write is fsync'ed (`telapa.io.atomic`); on.
- ``TELAPA_CHECKPOINT_SHARE``: the most of a run's wall clock its checkpoints may take,
  a number in (0, 1] (`telapa.continual.runner`: a phase is followed by a checkpoint
  once the time since the last one is at least that one's cost x (1 / share - 1); 1:
  after every phase); 0.02.
- ``TELAPA_JAX_CACHE``: JAX's persistent compilation cache, a folder or ``off`` (``0``,
  ``none``; `telapa.jaxcache`: a folder it cannot make is refused, naming the variable);
  ``~/.cache/telapa/jax`` (where that cannot be made, a warning, and no cache).

Seconds are a finite number >= 0 (``0.5``, ``30``); the cache folder is any path (made
when first used). A variable set empty is unset (a shell's ``VAR= telapa ...``)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import TypeVar

from telapa.config import ConfigError

LOG_INTERVAL = "TELAPA_LOG_INTERVAL"
SLURM_POLL = "TELAPA_SLURM_POLL_S"
SLURM_RESULT_WAIT = "TELAPA_SLURM_RESULT_WAIT_S"
THREADS = "TELAPA_THREADS"
FSYNC = "TELAPA_FSYNC"
CHECKPOINT_SHARE = "TELAPA_CHECKPOINT_SHARE"
JAX_CACHE = "TELAPA_JAX_CACHE"

DEFAULT_CHECKPOINT_SHARE = 0.02
"""``TELAPA_CHECKPOINT_SHARE`` when unset: a TeLAPA run's checkpoints took 10-12% of its
wall clock when one followed every phase (each copies every archive, 100 MB a task on
MiniGrid), and at most 2% of it leaves about 2 min between checkpoints at the end of a
long-curriculum run (a checkpoint of 2.5 s), the most a crash then loses."""

DEFAULT_SECONDS = {LOG_INTERVAL: 30.0, SLURM_POLL: 5.0, SLURM_RESULT_WAIT: 30.0}
"""The seconds variables and their values when unset."""

_ON = ("on", "1", "true", "yes")
_OFF = ("off", "0", "false", "no")
CACHE_OFF = ("off", "0", "none")
"""``TELAPA_JAX_CACHE`` values (any case) that turn the cache off: not `_OFF`'s words,
since ``false`` or ``no`` could be a folder's name."""


N = TypeVar("N", int, float)


def _text(name: str) -> str | None:
    """The variable's value, None when unset or empty (an empty value is unset, as a
    shell's ``VAR= command`` means it)."""
    text = os.environ.get(name)
    return None if text is None or not text.strip() else text


def _number(name: str, parse: Callable[[str], N], ok: Callable[[N], bool],
            what: str) -> N | None:
    """``name``'s value read by ``parse`` (`float`, `int`), None when unset; a
    `ConfigError` saying it must be ``what`` where ``parse`` fails or ``ok`` refuses it."""
    text = _text(name)
    if text is None:
        return None
    try:
        value = parse(text)
    except ValueError:
        value = None
    if value is None or not ok(value):
        raise ConfigError(f"{name}={text!r}: must be {what}")
    return value


def seconds(name: str) -> float:
    """``name``'s seconds (`DEFAULT_SECONDS` when unset): a finite number >= 0."""
    value = _number(name, float, lambda v: math.isfinite(v) and v >= 0,
                    "a number of seconds >= 0")
    return DEFAULT_SECONDS[name] if value is None else value


def threads() -> int | None:
    """``TELAPA_THREADS``: an integer >= 1, None when unset (the caller's default)."""
    return _number(THREADS, int, lambda v: v >= 1, "an integer >= 1")


def fsync() -> bool:
    """``TELAPA_FSYNC``: whether atomic writes fsync (on when unset)."""
    text = _text(FSYNC)
    if text is None or text.strip().lower() in _ON:
        return True
    if text.strip().lower() in _OFF:
        return False
    raise ConfigError(f"{FSYNC}={text!r}: must be one of {', '.join(_ON + _OFF)}")


def checkpoint_share() -> float:
    """``TELAPA_CHECKPOINT_SHARE``: a number in (0, 1] (`DEFAULT_CHECKPOINT_SHARE` when
    unset)."""
    value = _number(CHECKPOINT_SHARE, float, lambda v: 0 < v <= 1, "a number in (0, 1]")
    return DEFAULT_CHECKPOINT_SHARE if value is None else value


def jax_cache() -> str | None:
    """``TELAPA_JAX_CACHE``: the cache folder as written, or one of `CACHE_OFF`; None when
    unset (`telapa.jaxcache` then uses its default folder). Any text is a path, so there
    is nothing to refuse until the folder is made."""
    return _text(JAX_CACHE)


def check() -> None:
    """Reads every variable of this module's table: a `ConfigError` for the first one set
    to a value telapa cannot use."""
    for name in DEFAULT_SECONDS:
        seconds(name)
    threads()
    fsync()
    checkpoint_share()


__all__ = ["CACHE_OFF", "CHECKPOINT_SHARE", "DEFAULT_CHECKPOINT_SHARE", "DEFAULT_SECONDS",
           "FSYNC", "JAX_CACHE", "LOG_INTERVAL", "SLURM_POLL", "SLURM_RESULT_WAIT", "THREADS",
           "check", "checkpoint_share", "fsync", "jax_cache", "seconds", "threads"]
