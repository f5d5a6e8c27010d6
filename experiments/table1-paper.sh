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
# The study itself: a pinned sweep (experiments/pinned-sweep.sh: the worktree pinned at
# results/table1-paper.commit, each finished cell exported and committed). Seed batches
# of three seeds of a single-network method (~40 min) and two of TeLAPA or TeLAPA-Static
# (~50-80 min): a batch resumes from its checkpoints in runs/ when the study is restarted,
# and is lost only on a fresh checkout. (TeLAPA-Static took 0.41 h per seed in batches of
# two, 0.42 h alone: on two cores batching neither helps nor costs it.)
exec "$ROOT/experiments/pinned-sweep.sh" "$NAME" --seeds-per-batch 3 \
  --seeds-per-batch telapa=2 --seeds-per-batch telapa-static=2
