#!/usr/bin/env bash
# One cell of a pinned sweep, run (or resumed) now, ahead of the sweep's own order, from
# the sweep's pin, then exported to results/NAME/ and committed (only that folder):
#   (setsid nohup sh -c 'experiments/pinned-cell.sh NAME CELL; experiments/appendix-studies.sh' \
#     >/dev/null 2>&1 &)
# e.g. experiments/pinned-cell.sh mujoco-paper hopper-telapa-s0
# Why: a session lasts 3 h and may start on a new machine that kept only the checkout
# (2026-12-07: two in a row), so a cell still running at a session's end is lost with its
# checkpoints. A cell of 2-3 h ends only if it starts at a session's start, but a sweep
# runs its cells in its file's order, and a pin older than --until cannot be told to
# start the longest first. This runs the cell exactly as the sweep's worker does (the
# pinned telapa's run_job in the cell's directory under runs/NAME, the sweep's config
# from runs/NAME/cells.json, THREADS threads, default 2), records its end in its status
# file as the sweep does, and exports the finished cells; the sweep, run again after it,
# finds the cell done and goes on with the rest. It needs the sweep to have started once
# (its pin results/NAME.commit, its directory runs/NAME) and refuses a cell that is
# done, unknown, or being run by another process (the sweep's own lock).
# Logs to runs/NAME.log, as the sweep. The body is one brace group that bash reads whole
# before running it, so that editing this file while a cell runs cannot change what the
# running script does after it.
{
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 NAME CELL" >&2; exit 2; }
NAME=$1 CELL=$2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=$ROOT/.venv/bin/python
PIN=$ROOT/results/$NAME.commit
OUT=$ROOT/runs/$NAME
[ -f "$PIN" ] || { echo "error: $NAME has no pin ($PIN): start it with experiments/pinned-sweep.sh first" >&2; exit 2; }
[ -f "$OUT/cells.json" ] || { echo "error: $OUT/cells.json is missing: run experiments/pinned-sweep.sh $NAME once first" >&2; exit 2; }
[ -x "$PY" ] || { echo "error: $PY is missing: run make setup first" >&2; exit 2; }
COMMIT=$(cat "$PIN")
WT=$(dirname "$ROOT")/worktrees/$NAME-${COMMIT:0:7}
[ -d "$WT" ] || git -C "$ROOT" worktree add --detach "$WT" "$COMMIT"
export PYTHONPATH=$WT/src           # the pinned code, not main's (the venv is main's)
cd "$WT"
exec >>"$ROOT/runs/$NAME.log" 2>&1
echo "== $(date -u +%FT%TZ) $CELL alone, at commit $COMMIT in $WT"
status=0
nice -n 5 "$PY" - "$OUT" "$CELL" "$ROOT/results/$NAME" "${THREADS:-2}" <<'EOF' || status=$?
import json, os, sys
from pathlib import Path

out, name, dest, threads = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
import telapa
from telapa.continual.sweep import driver
from telapa.continual.sweep.export import export_sweep
from telapa.continual.sweep.jobs import run_job, thread_env
from telapa.continual.sweep.layout import read_status
from telapa.continual.sweep.status import cell_state
from telapa.continual.rundir import RunDir, RunDirError

assert telapa.__file__.startswith(os.environ["PYTHONPATH"]), telapa.__file__


def refuse(message: str) -> None:  # exit 2: nothing was run, nothing to commit
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


cells = {c["name"]: c for c in json.loads((out / "cells.json").read_text())["cells"]}
if name not in cells:
    refuse(f"{name} is not a cell of {out} ({len(cells)} cells, e.g. {min(cells)})")
lock = RunDir(out)
try:
    lock.lock()  # the sweep's own lock: refused while the sweep runs
except RunDirError as err:
    refuse(str(err))
try:
    state, _ = cell_state(out, name)
    if state == "done":
        refuse(f"{name} is already done in {out}")
    os.environ.update(thread_env(threads))
    ((_, result),) = run_job(str(out), [cells[name]])
    # the end of the try, recorded as the pinned sweep records it (attempts, errors)
    driver._record(out, name, read_status(out, name), result, print)
    summary = export_sweep(out, dest)
    print(f"exported {len(summary.added)} cell(s) to {dest} ({len(summary.kept)} there "
          f"before, {len(summary.left)} not done)", flush=True)
    if not result.get("ok"):
        sys.exit(f"error: {name} failed: {result.get('error')}")
finally:
    lock.unlock()
EOF
# commits only this sweep's results (none when nothing ran: a refusal)
. "$ROOT/experiments/commit-results.sh"
[ "$status" -eq 2 ] || commit_results "results/$NAME: $CELL" "results/$NAME"
echo "== $(date -u +%FT%TZ) $CELL end (exit $status)"
exit "$status"
}
