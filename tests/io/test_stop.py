"""A stop signal that arrives inside a garbage-collection callback (JAX registers one) is
recorded, not raised there: Python would drop the exception with an "Exception ignored"
traceback on stderr (CI saw it once). `raise_pending` raises it at the next boundary. One
that lands in a weakref's callback (which the stack cannot show; CI saw that too) is
dropped without a word; other dropped exceptions still reach the hook."""

from __future__ import annotations

import gc
import os
import signal
import sys
import time
import weakref

import pytest

from telapa.io import stop
from telapa.io.stop import Terminate, raise_pending, stop_on_signals


def _signal_self_and_wait(signum):
    os.kill(os.getpid(), signum)
    deadline = time.monotonic() + 5.0
    while not stop._pending and time.monotonic() < deadline:
        pass                             # the handler runs between these bytecodes


@pytest.mark.parametrize("where", ["gc callback", "finaliser", "weakref callback"])
def test_a_stop_inside_a_callback_python_drops_is_recorded_not_printed(where, monkeypatch):
    dropped = []
    monkeypatch.setattr(sys, "unraisablehook", dropped.append)
    fired = []

    def on_gc(phase, info):
        if phase == "start" and not fired:
            fired.append(phase)
            _signal_self_and_wait(signal.SIGTERM)

    class Finalised:
        def __del__(self):
            _signal_self_and_wait(signal.SIGTERM)

    with stop_on_signals():
        if where == "gc callback":
            gc.callbacks.append(on_gc)
            try:
                gc.collect()
            finally:
                gc.callbacks.remove(on_gc)
        elif where == "finaliser":
            Finalised()
        else:
            class Referent:
                pass
            referent = Referent()
            watch = weakref.ref(referent, lambda _: _signal_self_and_wait(signal.SIGTERM))
            del referent                 # the callback runs, from C, as it is freed
            assert watch() is None
        assert dropped == []
        with pytest.raises(Terminate):
            raise_pending()


def test_a_stop_elsewhere_is_raised_where_it_lands():
    with stop_on_signals(), pytest.raises(Terminate):
        _signal_self_and_wait(signal.SIGTERM)


def test_other_dropped_exceptions_still_reach_the_hook(monkeypatch):
    dropped = []
    monkeypatch.setattr(sys, "unraisablehook", dropped.append)

    class Failing:
        def __del__(self):
            raise ValueError("a finaliser's own fault")

    with stop_on_signals():
        Failing()
    assert [type(u.exc_value) for u in dropped] == [ValueError]
    assert sys.unraisablehook == dropped.append
