# Sourced by pinned-sweep.sh and pinned-cell.sh, with ROOT set to the checkout:
#   commit_results MESSAGE PATH...
# commits only PATH... to ROOT's branch (nothing when they did not change), and retries
# while another study's commit holds the index (git's index.lock): five tries, 7 s apart.
# A study's results are committed again at its next call, so a last failure is only said.
commit_results() {
  local message=$1
  shift
  for _ in 1 2 3 4 5; do
    git -C "$ROOT" add "$@" 2>/dev/null || { sleep 7; continue; }
    git -C "$ROOT" diff --cached --quiet -- "$@" && return 0
    git -C "$ROOT" commit -q -m "$message" -- "$@" && return 0
    sleep 7
  done
  echo "== $(date -u +%FT%TZ) could not commit $* (the index stayed busy)"
}
