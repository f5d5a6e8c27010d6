#!/usr/bin/env bash
# One sweep (configs/sweeps/NAME.yaml or experiments/NAME/sweep.yaml) in the background, from a git worktree pinned at
# the commit it first started on, exporting each finished cell to results/NAME/ and
# committing it to main (only that folder and its pin):
#   (setsid nohup experiments/pinned-sweep.sh NAME [telapa sweep options] >/dev/null 2>&1 &)
# e.g. experiments/pinned-sweep.sh table1-paper-seeds5-7 --seeds-per-batch 3
# Run the same command again to resume: the pin (results/NAME.commit) is kept, exported
# cells are skipped, partial ones go on from their checkpoints under runs/NAME where this
# checkout kept them. Logs to runs/NAME.log. With STUDY_UNTIL set (below), only the
# cells expected to end by then are started.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 NAME [telapa sweep options]" >&2; exit 2; }
NAME=$1; shift
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# The sweep file: configs/sweeps/NAME.yaml, or experiments/NAME/sweep.yaml (an experiment
# with its own curricula beside it).
SWEEP=configs/sweeps/$NAME.yaml
[ -f "$ROOT/$SWEEP" ] || SWEEP=experiments/$NAME/sweep.yaml
[ -f "$ROOT/$SWEEP" ] || { echo "error: neither configs/sweeps/$NAME.yaml nor $SWEEP exists in $ROOT" >&2; exit 2; }
RESULTS=$ROOT/results/$NAME
PY=$ROOT/.venv/bin/python
mkdir -p "$ROOT/runs"
exec >>"$ROOT/runs/$NAME.log" 2>&1
# STUDY_UNTIL already past (a chain whose study ended after it, or a late start): exit 75
# before anything, as a sweep does with no time for its cells, so that no pin is taken
# and no cell started (a pin older than --until would start one regardless).
if [ -n "${STUDY_UNTIL:-}" ]; then
  until_s=$(date -u -d "$STUDY_UNTIL" +%s 2>/dev/null) \
    || { echo "error: STUDY_UNTIL=$STUDY_UNTIL is not a time (e.g. 2026-12-05T18:20Z)" >&2; exit 2; }
  if [ "$until_s" -le "$(date -u +%s)" ]; then
    echo "== $(date -u +%FT%TZ) STUDY_UNTIL=$STUDY_UNTIL has passed: $NAME not started"
    exit 75
  fi
fi
# A machine without main's environment gets it first, from `make setup` (2026-12-07: a
# session found a new machine that had kept only the checkout, and every study's first
# python call would have failed with "No such file" until the venv was made by hand).
if [ ! -x "$PY" ]; then
  echo "== $(date -u +%FT%TZ) $PY is missing: make setup"
  make -C "$ROOT" setup || { echo "error: make setup failed; $NAME not started" >&2; exit 2; }
fi
# The pin sits beside the export, not in it: the export folder holds only the sweep's.
PIN=$RESULTS.commit
COMMIT=$(cat "$PIN" 2>/dev/null || git -C "$ROOT" rev-parse HEAD)
WT=$(dirname "$ROOT")/worktrees/$NAME-${COMMIT:0:7}
[ -d "$WT" ] || git -C "$ROOT" worktree add --detach "$WT" "$COMMIT"
[ -f "$WT/$SWEEP" ] || { echo "error: $SWEEP is not committed at the pin $COMMIT" >&2; exit 2; }
echo "$COMMIT" > "$PIN"
export PYTHONPATH=$WT/src           # the pinned code, not main's (the venv is main's)
cd "$WT"
"$PY" -c "import telapa, sys; assert telapa.__file__.startswith('$WT'), telapa.__file__"
# commit_results MESSAGE PATH...: commits only this sweep's results and pin
. "$ROOT/experiments/commit-results.sh"
# STUDY_UNTIL (an ISO time with its offset, e.g. 2026-12-05T18:20Z): the end of the
# machine's time. Passed as --until where the pinned telapa has it (it starts only the
# cells expected to end by then, and exits 75 with the rest left); a pin older than
# --until runs as before, its last cells lost if the machine goes first.
if [ -n "${STUDY_UNTIL:-}" ]; then
  if "$PY" -m telapa.cli sweep --help 2>/dev/null | grep -- '--until' >/dev/null; then
    set -- "$@" --until "$STUDY_UNTIL"
  else
    echo "== the pin $COMMIT has no --until; STUDY_UNTIL=$STUDY_UNTIL is not applied"
  fi
fi
echo "== $(date -u +%FT%TZ) start at commit $COMMIT in $WT: $*"
( while sleep 600; do
    commit_results "results/$NAME: cells finished so far" "results/$NAME" "results/$NAME.commit"
  done ) &
committer=$!
nice -n 5 "$PY" -m telapa.cli sweep "$SWEEP" "$@" \
  --out "$ROOT/runs/$NAME" --export "$RESULTS" || status=$?
kill "$committer" 2>/dev/null || true
outcome=${status:+stopped ($status)}
commit_results "results/$NAME: sweep ${outcome:-finished}" "results/$NAME" "results/$NAME.commit"
echo "== $(date -u +%FT%TZ) end"
exit "${status:-0}"
