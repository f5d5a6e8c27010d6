"""`telapa.io.clock.running`: stands still while the process is stopped (SIGSTOP, then
SIGCONT), and never runs backwards."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

CHILD = """
import json, sys, time
from telapa.io import clock
clock.STOP_GAP_S, clock.TICK_S = 0.5, 0.05
r0, p0 = clock.running(), time.perf_counter()
readings = []
print("ready", flush=True)
end = p0 + float(sys.argv[1])
while time.perf_counter() < end:
    readings.append(clock.running())
    time.sleep(0.001)
print(json.dumps({"running": clock.running() - r0, "perf": time.perf_counter() - p0,
                  "stopped": clock.stopped(),
                  "backwards": sum(b < a for a, b in zip(readings, readings[1:]))}))
"""


def _child(seconds: float, stop_s: float | None) -> dict:
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(seconds)],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "ready\n"
    if stop_s is not None:
        time.sleep(0.5)
        child.send_signal(signal.SIGSTOP)
        time.sleep(stop_s)
        child.send_signal(signal.SIGCONT)
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 0
    return json.loads(out)


def test_a_stop_is_not_counted_and_the_clock_never_runs_backwards():
    seen = _child(4.0, stop_s=2.0)
    assert seen["perf"] >= 4.0
    # the stop less STOP_GAP_S (0.5 here), give or take the signals' latency
    assert 1.4 <= seen["stopped"] <= 2.3, seen
    assert abs(seen["perf"] - seen["running"] - seen["stopped"]) < 0.05, seen
    assert seen["backwards"] == 0


def test_a_process_that_runs_counts_no_stop():
    seen = _child(1.5, stop_s=None)
    assert seen["stopped"] == 0.0
    assert abs(seen["perf"] - seen["running"]) < 0.05 and seen["backwards"] == 0
