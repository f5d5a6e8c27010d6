#!/usr/bin/env bash
# The paper-scale Table 1 study (configs/sweeps/table1-paper.yaml) in the background:
#   nohup experiments/table1-paper.sh &
# It starts only once the PPO calibration has chosen its preset
# (results/calibration-paper/selection.json, complete) and configs/runs/paper.yaml
# trains with that choice; then it runs from a worktree pinned at the commit it first
# started on, exports each finished cell to results/table1-paper/ and commits it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NAME=table1-paper
RESULTS=$ROOT/results/$NAME
PY=$ROOT/.venv/bin/python
"$PY" - "$ROOT" <<'PYEOF'
import json, sys
from pathlib import Path
from telapa.continual.preset import load_run_config
from telapa.config import load_config, preset_path
root = Path(sys.argv[1])
sel_file = root / "results/calibration-paper/selection.json"
if not sel_file.is_file():
    sys.exit(f"error: {sel_file} is missing: finish the calibration first "
             "(experiments/calibration-paper.sh, then python -m telapa.analysis.calibration)")
sel = json.loads(sel_file.read_text())
if not sel["complete"]:
    sys.exit(f"error: {sel_file} is provisional: the calibration has not finished")
chosen = load_config(preset_path(sel["chosen"]["preset"]))
chosen = chosen.model_copy(update={"network": chosen.network.model_copy(
    update={"grid_codes": sel["chosen"]["grid_codes"]})})
paper = load_run_config(root / "configs/runs/paper.yaml").train
if paper.ppo != chosen.ppo or paper.network != chosen.network:
    sys.exit(f"error: configs/runs/paper.yaml does not train with the chosen preset "
             f"{sel['chosen']}; set its train: and commit before starting the study")
PYEOF
mkdir -p "$ROOT/runs"
exec >>"$ROOT/runs/$NAME.log" 2>&1
# The pin sits beside the export, not in it: the export folder holds only the sweep's.
PIN=$RESULTS.commit
COMMIT=$(cat "$PIN" 2>/dev/null || git -C "$ROOT" rev-parse HEAD)
WT=$(dirname "$ROOT")/worktrees/$NAME-${COMMIT:0:7}
[ -d "$WT" ] || git -C "$ROOT" worktree add --detach "$WT" "$COMMIT"
echo "$COMMIT" > "$PIN"
export PYTHONPATH=$WT/src
cd "$WT"
commit_results() {
  for _ in 1 2 3 4 5; do
    git -C "$ROOT" add "results/$NAME" "results/$NAME.commit" 2>/dev/null \
      || { sleep 7; continue; }
    if git -C "$ROOT" diff --cached --quiet -- "results/$NAME" "results/$NAME.commit"; then
      return 0
    fi
    git -C "$ROOT" commit -q -m "results/$NAME: $1" -- "results/$NAME" \
      "results/$NAME.commit" && return 0
    sleep 7
  done
}
echo "== $(date -u +%FT%TZ) start at commit $COMMIT in $WT"
( while sleep 900; do commit_results "cells finished so far"; done ) &
committer=$!
# Seed batches of three seeds of a single-network method (~40 min) and two of TeLAPA or
# TeLAPA-Static (~50-80 min): a batch resumes from its checkpoints in runs/ when the
# study is restarted, and is lost only on a fresh checkout. (TeLAPA-Static took 0.41 h
# per seed in batches of two, 0.42 h alone: on two cores batching neither helps nor
# costs it.)
nice -n 5 "$PY" -m telapa.cli sweep "configs/sweeps/$NAME.yaml" --seeds-per-batch 3 \
  --seeds-per-batch telapa=2 --seeds-per-batch telapa-static=2 \
  --out "$ROOT/runs/$NAME" --export "$RESULTS" || status=$?
kill "$committer" 2>/dev/null || true
outcome=${status:+stopped ($status)}
commit_results "sweep ${outcome:-finished}"
echo "== $(date -u +%FT%TZ) end"
exit "${status:-0}"
