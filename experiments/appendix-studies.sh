#!/usr/bin/env bash
# The paper's appendix studies still to run, one after another in the background
# (docs/reproduction.md: the MuJoCo friction-shift appendix, then cross-archive elite
# injection without and with the count bonus, then the long curriculum):
#   (setsid nohup experiments/appendix-studies.sh >/dev/null 2>&1 &)
# Each is a pinned sweep (experiments/pinned-sweep.sh) with its own pin
# (results/NAME.commit), taken at the commit main is on when that study starts: run this
# again to resume; finished studies are skipped in seconds. A study that stops (killed,
# failed after its retries) stops the chain. The options are those each study's design
# fixes (its sweep file's header).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
"$HERE/pinned-sweep.sh" mujoco-paper --workers 2 --threads 1 --retries 2
"$HERE/pinned-sweep.sh" elite-injection-paper --seeds-per-batch 1 --retries 2
"$HERE/pinned-sweep.sh" elite-injection-intrinsic-paper --seeds-per-batch 1 --retries 2
"$HERE/pinned-sweep.sh" long-curriculum-paper --seeds-per-batch 3 \
  --seeds-per-batch telapa=1 --seeds-per-batch telapa-fresh=1 --retries 2
