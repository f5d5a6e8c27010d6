#!/usr/bin/env bash
# The paper-scale MiniGrid PPO calibration (docs/assumptions.md, "The MiniGrid PPO
# preset"), in the background:  nohup experiments/calibration-paper.sh &
# 1. the cost of the four variants side by side (benchmarks/calibration_cost.py), once,
#    before any training shares the cores;
# 2. the Scratch sweep (the choice rests on it), then the Finetune sweep, seeds batched;
#    each finished cell is exported to results/calibration-paper/ and committed.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NAME=calibration-paper
RESULTS=$ROOT/results/$NAME
mkdir -p "$RESULTS" "$ROOT/runs"
LOG=$ROOT/runs/$NAME.log
exec >>"$LOG" 2>&1
COMMIT=$(cat "$RESULTS/commit" 2>/dev/null || git -C "$ROOT" rev-parse HEAD)
WT=$(dirname "$ROOT")/worktrees/$NAME-${COMMIT:0:7}
if [ ! -d "$WT" ]; then
  git -C "$ROOT" worktree add --detach "$WT" "$COMMIT"
fi
echo "$COMMIT" > "$RESULTS/commit"
export PYTHONPATH=$WT/src           # the pinned code, not main's (the venv is main's)
PY=$ROOT/.venv/bin/python
cd "$WT"
"$PY" -c "import telapa, sys; assert telapa.__file__.startswith('$WT'), telapa.__file__"

commit_results() {  # commits only this experiment's results folder; retries a busy index
  for _ in 1 2 3 4 5; do
    git -C "$ROOT" add "results/$NAME" 2>/dev/null || { sleep 7; continue; }
    if git -C "$ROOT" diff --cached --quiet -- "results/$NAME"; then return 0; fi
    git -C "$ROOT" commit -q -m "results/$NAME: $1" -- "results/$NAME" && return 0
    sleep 7
  done
  echo "could not commit results/$NAME ($1)"
}

echo "== $(date -u +%FT%TZ) start at commit $COMMIT in $WT"
if [ ! -f "$RESULTS/cost.json" ]; then
  "$PY" benchmarks/calibration_cost.py --out "$RESULTS/cost.json"
  commit_results "cost of the four variants (benchmarks/calibration_cost.py)"
fi
exported_all() {  # whether results/$NAME/$1 holds every cell of its sweep (a fresh
  # checkout has no runs/ to resume from, so a finished part must not run again)
  [ -f "$RESULTS/$1/cells.json" ] && "$PY" -c 'import json, sys
d = json.load(open(sys.argv[1])); sys.exit(len(d["cells"]) != d["of_cells"])' \
    "$RESULTS/$1/cells.json"
}
for part in scratch finetune; do
  if exported_all "$part"; then echo "$part: every cell is in results/$NAME/$part"; continue; fi
  ( while sleep 900; do commit_results "$part cells finished so far"; done ) &
  committer=$!
  nice -n 5 "$PY" -m telapa.cli sweep "configs/sweeps/$NAME-$part.yaml" --batch-seeds \
    --out "$ROOT/runs/$NAME-$part" --export "$RESULTS/$part" || status=$?
  kill "$committer" 2>/dev/null || true
  outcome=${status:+stopped ($status)}
  commit_results "$part sweep ${outcome:-finished}"
  [ -z "${status:-}" ] || exit "$status"
done
echo "== $(date -u +%FT%TZ) done"
