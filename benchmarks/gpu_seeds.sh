#!/usr/bin/env bash
# Many seeds on one accelerator, sized for a 15-minute device lease (one call). Each stage
# has its own time limit, so the call ends with what it measured; benchmarks/seed_batch.py
# rewrites its JSON after every measurement.
#   bash benchmarks/gpu_seeds.sh [RESULTS_DIR] [STAGE...]
# Stages (default: large iterations):
#   small       S = 1, 8 (Finetune, smoke curriculum, the CPU table's budget of 4 visits x
#               245,760 steps), three separate processes measured, the rest counted at
#               their warm mean (measured on an H100 on 2026-11-27: seed_batch.gpu.json)
#   large       S = 32, 128, two separate processes
#   iterations  S = 1, 8 with 8 PPO iterations per jitted call (one host round trip per
#               8 iterations instead of every iteration)
#   study       one Table 1 cell as the study ran it: Finetune, five seeds as one batch,
#               primary curriculum, study preset (2-core CPU: 0.38 h), its progress log
set -uo pipefail
out=${1:-benchmarks/results}
shift || true
stages=${*:-large iterations}
py=${PYTHON:-python3}
mkdir -p "$out"
export TELAPA_JAX_CACHE=${TELAPA_JAX_CACHE:-/tmp/telapa-jax-cache}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$py" -c "import jax; print('jax', jax.__version__, jax.devices())"
budget=(--steps-per-visit 245760)

for stage in $stages; do
  case $stage in
    small) timeout "${STAGE_S:-300}" "$py" benchmarks/seed_batch.py "${budget[@]}" \
             --sizes 1 8 --separate 3 --out "$out/seed_batch.gpu.json"; rc=$? ;;
    large) timeout "${STAGE_S:-300}" "$py" benchmarks/seed_batch.py "${budget[@]}" \
             --sizes 32 128 --separate 2 --out "$out/seed_batch_large.gpu.json"; rc=$? ;;
    iterations) timeout "${STAGE_S:-240}" "$py" benchmarks/seed_batch.py "${budget[@]}" \
             --sizes 1 8 --separate 2 --iterations-per-call 8 \
             --out "$out/seed_batch_k8.gpu.json"; rc=$? ;;
    study) run=$(mktemp -d)/study-finetune
           timeout "${STAGE_S:-220}" "$py" -m telapa.cli run --curriculum primary \
             --method finetune --preset study --seeds 0-4 --out "$run" --log-interval 10 \
             2> "$out/study_finetune.gpu.log"; rc=$?
           tail -n 3 "$out/study_finetune.gpu.log" ;;
    *) echo "unknown stage $stage (small, large, iterations, study)" >&2; exit 2 ;;
  esac
  echo "stage $stage: exit $rc (124: stopped at its time limit)"
done
