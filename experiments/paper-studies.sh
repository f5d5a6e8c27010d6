#!/usr/bin/env bash
# The studies that follow the paper-budget Table 1 study (docs/reproduction.md, "Eight
# seeds, a fresh start and two more orders", and "Why the paper's baselines differ from
# ours"), one after another in the background:
#   (setsid nohup experiments/paper-studies.sh >/dev/null 2>&1 &)
# Each is a pinned sweep (experiments/pinned-sweep.sh) with its own pin
# (results/NAME.commit): run this again to resume; finished studies are skipped in
# seconds. A study that stops (killed, failed) stops the chain.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# The pinned studies run code from before 18c25b4, whose TeLAPA workers keep every
# program they compile mapped: at the paper's budget a reverse TeLAPA cell passed Linux's
# default 65530 memory maps per process and died in LLVM with "Cannot allocate memory"
# (2026-11-29, 24 GiB free). Since 18c25b4 a run releases idle tasks' programs past half
# the limit (telapa.continual.agents); for the pinned code, raise the limit where we may;
# a failed cell resumes from its checkpoint (--retries below, or the next run of this script).
if [ "$(cat /proc/sys/vm/max_map_count 2>/dev/null || echo 0)" -lt 262144 ]; then
  { echo 262144 > /proc/sys/vm/max_map_count; } 2>/dev/null \
    || echo "warning: vm.max_map_count is $(cat /proc/sys/vm/max_map_count); TeLAPA cells" \
            "may die with 'Cannot allocate memory' (sysctl -w vm.max_map_count=262144)" >&2
fi
"$HERE/pinned-sweep.sh" table1-paper-seeds5-7 --seeds-per-batch 3 \
  --seeds-per-batch telapa=1 --seeds-per-batch telapa-static=1
"$HERE/pinned-sweep.sh" baseline-diagnosis --seeds-per-batch 3
ROOT=$(dirname "$HERE")
EVAL=$ROOT/results/baseline-diagnosis-eval.csv
if [ ! -f "$EVAL" ]; then  # the final policies sampled and greedy (its pinned script)
  WT=$(dirname "$ROOT")/worktrees/baseline-diagnosis-$(cut -c1-7 "$ROOT/results/baseline-diagnosis.commit")
  PYTHONPATH=$WT/src "$ROOT/.venv/bin/python" "$WT/experiments/baseline-diagnosis/evaluate.py" \
    "$ROOT/runs/baseline-diagnosis" --out "$EVAL" >>"$ROOT/runs/baseline-diagnosis.log" 2>&1
  git -C "$ROOT" add "$EVAL" && git -C "$ROOT" commit -q -m \
    "results/baseline-diagnosis-eval.csv: the final policies sampled and greedy" -- "$EVAL"
fi
"$HERE/pinned-sweep.sh" table1-paper-fresh --seeds-per-batch 1
"$HERE/pinned-sweep.sh" alternative-curricula-paper --seeds-per-batch 3 \
  --seeds-per-batch telapa=1 --seeds-per-batch telapa-fresh=1 --retries 2
