"""SIGTERM (a scheduler's stop, ``kill``) stops ``telapa run`` as Ctrl-C does: it killed the
process where it stood, with no ``--resume`` hint. Now one line with the hint, exit 143,
and the resume ends in an uninterrupted run's results."""

from __future__ import annotations

import json
import signal

from .conftest import RUN, assert_same_results, start_telapa, telapa, wait_for


def test_sigterm_stops_a_run_with_its_resume_hint(reference, tmp_path, no_leaked_processes):
    run = tmp_path / "run"
    proc = start_telapa(*RUN, "--seed", "0", "--out", str(run))
    pointer = run / "checkpoint.json"
    wait_for(lambda: pointer.is_file() and json.loads(pointer.read_text())["previous"],
             proc, what="a second checkpoint")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    last = err.strip().splitlines()[-1]
    assert last == (f"telapa: error: terminated (SIGTERM); {run} keeps its last checkpoint: "
                    f"continue with `telapa run --resume {run}`"), err
    assert "Traceback" not in err
    done = telapa("run", "--resume", str(run))
    assert done.returncode == 0, done.stderr
    assert_same_results(run, reference)
