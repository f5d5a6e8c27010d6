#!/usr/bin/env bash
# The paper's appendix studies still to run, one after another in the background
# (docs/reproduction.md: cross-archive elite injection without and with the count bonus,
# then the long curriculum, then the MuJoCo friction-shift appendix, then its seeds 5-7
# where the pace allows; the shorter MiniGrid studies go first since 2026-12-05, when
# the MuJoCo study, begun first, stood at HalfCheetah done and Hopper started, with some
# 45 h of its wall time left against their 24 or so):
#   (STUDY_UNTIL=$(date -u -d +160min +%FT%TZ) setsid nohup experiments/appendix-studies.sh \
#     >/dev/null 2>&1 &)
# (160 min of a 3 h session since 2026-12-07: the long curriculum's TeLAPA cells count
# 2.54 h by their seed 0's record, which a 150-minute window never fits.)
# (STUDY_UNTIL, optional: when the machine's time ends, less the time the session's own
# last work needs; a study pinned where telapa has --until starts only the cells
# expected to end by then. When one has cells left for lack of time (exit 75), the
# rest of the time goes to the studies after it that are already pinned
# (results/NAME.commit), whose cells may be shorter: since 2026-12-06, when the long
# curriculum had only TeLAPA cells left (1.6-1.9 h each) and an hour and a half of a
# session to fill, which the MuJoCo study's Hopper baseline cells (0.4 h each alone)
# filled. A study not yet pinned is not started then, so that no pin is taken for cells
# that cannot end; the chain exits 75 at its end.)
# Each is a pinned sweep (experiments/pinned-sweep.sh) with its own pin
# (results/NAME.commit), taken at the commit main is on when that study starts: run this
# again to resume; finished studies are skipped in seconds. A study stopped by a signal
# (the session's end, a kill) stops the chain; one whose cells failed after their retries
# does not: the chain goes on to the next study (so the cores stay busy) and exits with
# that failure at its end, and running it again tries the failed cells again. The options
# are those each study's design fixes (its sweep file's header), except that since
# 2026-12-05 every study runs one seed a job on one two-thread worker: a session lasts
# 3 h, and a cell still running when it ends can be lost with its checkpoints (a session
# may start on a new machine; one on 2026-12-05 did, the next found that machine again,
# runs/ and all, and resumed its cells), so a job should end within a session (a 3-seed
# batch of the long curriculum, about 3 h, would never finish). Two one-thread workers
# were tried on the injection study on 2026-12-05: a TeLAPA cell took 1.9-2.0 h beside
# another (1.1 h alone on two threads), which the long curriculum's 16 visits (some
# 2.6-3 h) and Hopper's and Walker2d's TeLAPA cells (some 3.4 h) would not fit in a
# session. When the chain has stopped for lack of time (exit 75, every pinned study out
# of time), run it again without
# STUDY_UNTIL for the rest of the session: the cell it starts then resumes from its
# checkpoints in the next session if the machine is kept, and is started again from
# nothing if not, so the tail of a session is never worse used than idle (2026-12-06).
# For a quiet fresh-clone `make test` meanwhile, pause the chain's process group
# (kill -STOP -- -PGID, the chain's PID under setsid) and resume it after (kill -CONT):
# the local sweep has no timers that a pause trips. A pause does count in the paused
# cell's recorded wall clock, and so in its own pace that --until reads, under every pin
# before telapa.io.clock (2026-12-06, after all of this chain's pins): on 2026-12-06 a
# 19-minute pause made Finetune seed 1's 3 visits look 2.8 h from its end, and --until
# started seed 2 instead.
# Logs to runs/appendix-studies.log (each study to runs/NAME.log).
# The body is one brace group that bash reads whole before running it, so editing this
# file while a chain runs cannot change what the running chain does next.
{
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
LOG=$(dirname "$HERE")/runs/appendix-studies.log
mkdir -p "$(dirname "$LOG")"
failed=0
out_of_time=0
study() {  # study COMMAND...: runs one pinned sweep and applies the rules above
  if [ "$out_of_time" -eq 1 ] && [ ! -f "$(dirname "$HERE")/results/$2.commit" ]; then
    echo "$(date -u +%FT%TZ) $2: not started (not pinned, and time ran short)" >>"$LOG"
    return
  fi
  "$@"
  local status=$?
  echo "$(date -u +%FT%TZ) $2: exit $status" >>"$LOG"
  if [ "$status" -ge 128 ]; then exit "$status"; fi
  if [ "$status" -eq 75 ]; then out_of_time=1; return; fi  # STUDY_UNTIL: no time left
  if [ "$status" -ne 0 ]; then failed=$status; fi
}
study "$HERE/pinned-sweep.sh" elite-injection-paper --workers 1 --threads 2 --retries 2
study "$HERE/pinned-sweep.sh" elite-injection-intrinsic-paper --workers 1 --threads 2 \
  --retries 2
study "$HERE/pinned-sweep.sh" long-curriculum-paper --workers 1 --threads 2 --retries 2
# MuJoCo: its pin (fd54865) predates --until, so after a study out of time it runs its
# cells in the sweep's order whatever time is left. From 2026-12-05 to 2026-12-07 it ran
# one cell at a time on both threads, for fear that a Hopper or Walker2d TeLAPA cell on
# one thread beside another would take about 3.4 h (HalfCheetah's 1.0 h scaled by
# Hopper's 3.4x cost per PPO visit), longer than a session. Measured on 2026-12-07:
# hopper-telapa-s0, run first in its session by experiments/pinned-cell.sh, took 0.88 h
# alone on both threads (maintenance 0.29 h, PPO 0.31 h, illumination 0.18 h: Hopper's
# falls end its illumination episodes early), and it kept 1.04 cores busy (its first
# 11 minutes): half the machine idle. So from 2026-12-07 two
# one-thread workers run it again, as on HalfCheetah. The rule, fixed before the first
# pair ran: two workers stay while Hopper's Finetune-Reset seeds 2 and 3, run side by
# side, each end within 0.50 h (1.5x the 0.33 h of seed 1 alone: two cells at a time then
# do at least 1.33x the work of one); otherwise one worker on both threads again. The
# pair took 0.357 h (two segments) and 0.354 h side by side, 1.9x the work of one worker:
# the rule holds, and seeds 5-7 run the same way.
study "$HERE/pinned-sweep.sh" mujoco-paper --workers 2 --threads 1 --retries 2
study "$HERE/pinned-sweep.sh" mujoco-paper-seeds5-7 --workers 2 --threads 1 --retries 2
if [ "$failed" -eq 0 ] && [ "$out_of_time" -eq 1 ]; then exit 75; fi
exit "$failed"
}
