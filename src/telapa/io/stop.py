"""A stop the user asked for (Ctrl-C, SIGTERM), kept until the run acts on it.

Python runs a signal handler between bytecodes of the main thread, wherever it is; when
that is inside a garbage-collection callback (JAX registers one, ``_xla_gc_callback``)
the ``KeyboardInterrupt`` the handler raises is printed as "Exception ignored" and
dropped, and the run went on to its end as if never stopped (a probe: 1 of 4 Ctrl-Cs
shortly after a checkpoint). So `stop_on_signals` installs handlers that record the
stop before they raise it, and the run loops call `raise_pending` at their boundaries
(each phase, each training call): a dropped stop is raised again there, within seconds.
Where the handler can see that it interrupts such a callback (a frame of one of
``gc.callbacks`` or of a ``__del__`` on the stack) it only records the stop: raising there
would print the dropped exception's traceback (CI saw it once in 1361 tests). A
callback the stack does not show (a weakref's, called from the C code that freed its
referent: CI saw one in ``WeakKeyDictionary``) drops the raised stop the same way, so
within `stop_on_signals` ``sys.unraisablehook`` passes over a stop it recorded, and hands
every other dropped exception to the hook it had.

A scheduler's warning (Slurm's ``--signal``, some time before a job's time limit or its
pre-emption) asks for a gentler stop: `stop_on_signals` given ``boundary_signals`` records
it only, and the run loops' `raise_pending` at a phase boundary (``boundary=True``: the
phase just ended has been committed, with its checkpoint) raises `PhaseStop` there; the
checks inside a phase let it run on.
"""

from __future__ import annotations

import gc
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

_pending: list[type[BaseException]] = []
_boundary: list[int] = []


class Terminate(KeyboardInterrupt):
    """The stop SIGTERM asks for (a scheduler's stop, ``kill``): unwinds as Ctrl-C does."""


class PhaseStop(Terminate):
    """A stop asked for at the next phase boundary (`stop_on_signals`'s
    ``boundary_signals``): raised there, after the phase's checkpoint."""


def raise_pending(*, boundary: bool = False) -> None:
    """Raises the stop recorded by a signal (`stop_on_signals`), if any is pending; at a
    phase ``boundary`` also a `PhaseStop` asked for."""
    if _pending:
        raise _pending[-1]()
    if boundary and _boundary:
        raise PhaseStop()


def stop_pending() -> bool:
    """Whether a stop is recorded and not yet raised (`raise_pending` would raise): the
    run loops commit a checkpoint before they act on it."""
    return bool(_pending or _boundary)


def _at_boundary(signum, frame) -> None:
    _boundary.append(signum)


def _in_dropping_callback(frame) -> bool:
    """Whether ``frame`` or a caller runs where Python drops exceptions: a garbage
    collection callback (one of ``gc.callbacks``) or a finaliser (``__del__``)."""
    codes = {getattr(callback, "__code__", None) for callback in gc.callbacks}
    while frame is not None:
        if frame.f_code in codes or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def _handler(kind: type[BaseException]):
    def stop(signum, frame):
        _pending.append(kind)
        if not _in_dropping_callback(frame):
            raise kind()
    return stop


def _passing_over_stops(previous):
    def hook(unraisable) -> None:
        if not (_pending and isinstance(unraisable.exc_value, tuple(_pending))):
            previous(unraisable)
    return hook


@contextmanager
def stop_on_signals(*, boundary_signals: tuple[int, ...] = ()) -> Iterator[None]:
    """Within it, SIGINT raises `KeyboardInterrupt` and SIGTERM `Terminate`, each also
    recorded for `raise_pending` (and not printed where Python drops it), and each of
    ``boundary_signals`` is recorded for a `PhaseStop` at the next phase boundary; the
    previous handlers, unraisable hook and an empty record after. Off the main thread
    (where no handler can be set) it does nothing."""
    try:
        previous = {signal.SIGINT: signal.signal(signal.SIGINT, _handler(KeyboardInterrupt)),
                    signal.SIGTERM: signal.signal(signal.SIGTERM, _handler(Terminate))}
        for signum in boundary_signals:
            previous[signum] = signal.signal(signum, _at_boundary)
    except ValueError:
        yield
        return
    unraisable = sys.unraisablehook
    sys.unraisablehook = _passing_over_stops(unraisable)
    try:
        yield
    finally:
        sys.unraisablehook = unraisable
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _pending.clear()
        _boundary.clear()


__all__ = ["PhaseStop", "Terminate", "raise_pending", "stop_on_signals", "stop_pending"]
