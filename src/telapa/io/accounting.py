"""Compute accounting (paper App. "Compute and Memory Overhead").

* :class:`PhaseTimer` - wall-clock seconds per named phase, resumable from saved totals;
* :class:`MemoryMonitor` - peak resident set size of this process plus its children;
* :func:`dir_size_bytes` - disk footprint of a run directory;
* :func:`tree_nbytes` - size of a pytree of arrays ("stored method state").
"""

from __future__ import annotations

import math
import os
import stat
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import TracebackType
from typing import Any

import jax
import numpy as np
import psutil

from telapa.io.clock import running

try:
    import resource
except ImportError:  # pragma: no cover - not on Windows
    resource = None  # type: ignore[assignment]

__all__ = ["MemoryMonitor", "PhaseTimer", "dir_size_bytes", "tree_nbytes"]


class PhaseTimer:
    """Accumulates elapsed seconds per named phase: ``with timer.phase("train"): ...``.

    Phases may nest and overlap; each name is timed independently, and re-entering a name
    that is already open counts its time once (the outermost entry). :attr:`totals` includes
    the time elapsed so far in phases that are still open, so totals saved at a checkpoint
    taken inside a ``"total"`` phase are up to date. ``clock`` is injectable for tests.
    """

    def __init__(
        self,
        clock: Callable[[], float] = running,
        totals: Mapping[str, float] | None = None,
    ) -> None:
        self._clock = clock
        self._totals: dict[str, float] = {k: float(v) for k, v in (totals or {}).items()}
        self._open: dict[str, tuple[float, int]] = {}  # name -> (start, depth)
        self._lock = threading.Lock()

    @classmethod
    def from_totals(
        cls, totals: Mapping[str, float], clock: Callable[[], float] = running
    ) -> PhaseTimer:
        """A timer that continues from ``totals`` (e.g. saved before a resume)."""
        return cls(clock=clock, totals=totals)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block under ``name``."""
        with self._lock:
            start, depth = self._open.get(name, (None, 0))
            self._open[name] = (self._clock() if start is None else start, depth + 1)
        try:
            yield
        finally:
            with self._lock:
                start, depth = self._open[name]
                if depth == 1:
                    del self._open[name]
                    self._totals[name] = self._totals.get(name, 0.0) + (self._clock() - start)
                else:
                    self._open[name] = (start, depth - 1)

    def add(self, name: str, seconds: float) -> None:
        """Add ``seconds`` to ``name`` (time measured elsewhere)."""
        with self._lock:
            self._totals[name] = self._totals.get(name, 0.0) + float(seconds)

    @property
    def totals(self) -> dict[str, float]:
        """Seconds per phase, including the running part of open phases (a copy)."""
        with self._lock:
            out = dict(self._totals)
            if self._open:
                now = self._clock()
                for name, (start, _) in self._open.items():
                    out[name] = out.get(name, 0.0) + (now - start)
        return out


def _rusage_peak_bytes() -> int:
    """max(ru_maxrss of this process, ru_maxrss of its largest waited-for descendant).

    Each is a lower bound of the true peak of (self + children), so folding it in never
    over-reports; it catches short peaks that fall between two samples.
    """
    if resource is None:  # pragma: no cover
        return 0
    unit = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    peak = max(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    )
    return int(peak) * unit


class MemoryMonitor:
    """Peak resident set size (bytes) of this process plus all its live child processes.

    A daemon thread sums the RSS of the process and its descendants (``recursive=True``;
    children that vanish mid-sample are skipped) every ``interval_s`` seconds and keeps the
    maximum, folded with ``getrusage`` ``ru_maxrss`` (see :func:`_rusage_peak_bytes`). RSS
    counts pages shared between processes once per process, as ``ps``/``top`` do.
    ``initial_peak_bytes`` carries the peak of earlier segments of a resumed run.

    ``ru_maxrss`` is the peak of the whole process lifetime, also before the monitor
    was created, and even before the process's program started: Linux carries the
    high-water mark across ``exec``, so a process started by a larger one begins with that
    one's peak (a child of a 1.5 GB Python process reads 1.5 GB at its first line, as a
    check of this rule did when a test worker of several GB started it).

    With ``lifetime=True`` it is folded in as it is, so the peak is the process's. With
    ``lifetime=False`` the peak covers only the monitored span: ru_maxrss counts only
    where it rose above its value when the monitor was created, since ru_maxrss never
    falls and so a rise is a new peak within the span. A short peak between two samples
    is still caught where it is the process's highest yet, not otherwise. A run monitors
    its span (`telapa.continual.driver`): a sweep worker runs its cells one after another
    in one process, and the lifetime peak of a TeLAPA cell was recorded again as the peak
    of the baseline cells after it in that worker (2026-12-07: Hopper Scratch cells at
    2.8-3.0 GB where one run alone peaked at 0.84 GB).
    """

    def __init__(
        self, interval_s: float = 0.5, initial_peak_bytes: int = 0, *, lifetime: bool = True
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        self.interval_s = float(interval_s)
        self._proc = psutil.Process()
        # ru_maxrss counts where above this: all of it for the lifetime, else rises only
        self._rusage_before = 0 if lifetime else _rusage_peak_bytes()
        self._peak = int(initial_peak_bytes)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def current_bytes(self) -> int:
        """RSS of this process plus its live descendants, now."""
        total = self._proc.memory_info().rss
        for child in self._proc.children(recursive=True):
            try:
                total += child.memory_info().rss
            except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
                continue
        return total

    def sample(self) -> int:
        """Take one sample now, update the peak and return the current bytes."""
        current = self.current_bytes()
        with self._lock:
            self._peak = max(self._peak, current, self._rusage())
        return current

    def _rusage(self) -> int:
        """``ru_maxrss`` (`_rusage_peak_bytes`), or with ``lifetime=False`` 0 unless it
        rose above its value at the monitor's creation."""
        peak = _rusage_peak_bytes()
        return peak if peak > self._rusage_before else 0

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.sample()
            except Exception:  # never let a sampling hiccup kill the monitor
                continue

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> MemoryMonitor:
        """Start sampling (takes a first sample immediately). Idempotent."""
        if self._thread is None:
            self._stop.clear()
            self.sample()
            self._thread = threading.Thread(
                target=self._run, name="telapa-memory-monitor", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling after a final sample. Idempotent."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self.sample()

    @property
    def peak_bytes(self) -> int:
        """The peak so far (max over samples, ``ru_maxrss`` and ``initial_peak_bytes``)."""
        with self._lock:
            return max(self._peak, self._rusage())

    def __enter__(self) -> MemoryMonitor:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def dir_size_bytes(path: str | os.PathLike[str]) -> int:
    """Total apparent size (``st_size``) of the regular files under ``path``.

    Symlinks inside the tree are not followed (nor counted), hard-linked files count once,
    and entries that vanish during the walk are skipped. A regular file gives its size.
    """
    top = os.stat(path)
    if stat.S_ISREG(top.st_mode):
        return top.st_size
    total = 0
    seen: set[tuple[int, int]] = set()
    stack = [os.fspath(path)]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                entries = list(it)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    if (st.st_dev, st.st_ino) not in seen:
                        seen.add((st.st_dev, st.st_ino))
                        total += st.st_size
            except FileNotFoundError:
                continue
    return total


def _leaf_nbytes(leaf: Any) -> int:
    dtype = getattr(leaf, "dtype", None)
    is_key = dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
    if isinstance(leaf, jax.ShapeDtypeStruct):
        if is_key:
            leaf = jax.eval_shape(jax.random.key_data, leaf)
        return math.prod(leaf.shape) * np.dtype(leaf.dtype).itemsize
    if is_key:
        leaf = jax.random.key_data(leaf)
    nbytes = getattr(leaf, "nbytes", None)
    return int(nbytes) if nbytes is not None else int(np.asarray(leaf).nbytes)


def tree_nbytes(tree: Any) -> int:
    """Sum of the leaves' ``nbytes`` (typed PRNG keys count their key data; Python scalars
    count as 0-d numpy arrays; ``jax.ShapeDtypeStruct`` leaves count their would-be size)."""
    return sum(_leaf_nbytes(leaf) for leaf in jax.tree.leaves(tree))
