#!/usr/bin/env bash
# The studies that follow the paper-budget Table 1 study (docs/reproduction.md, "Eight
# seeds, a fresh start and two more orders"), one after another in the background:
#   (setsid nohup experiments/paper-studies.sh >/dev/null 2>&1 &)
# Each is a pinned sweep (experiments/pinned-sweep.sh) with its own pin
# (results/NAME.commit): run this again to resume; finished studies are skipped in
# seconds. A study that stops (killed, failed) stops the chain.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
"$HERE/pinned-sweep.sh" table1-paper-seeds5-7 --seeds-per-batch 3 \
  --seeds-per-batch telapa=1 --seeds-per-batch telapa-static=1
"$HERE/pinned-sweep.sh" table1-paper-fresh --seeds-per-batch 1
"$HERE/pinned-sweep.sh" alternative-curricula-paper --seeds-per-batch 3 \
  --seeds-per-batch telapa=1 --seeds-per-batch telapa-fresh=1
