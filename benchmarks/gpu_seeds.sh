#!/usr/bin/env bash
# Many seeds on one accelerator, sized for a 15-minute device lease (one call):
#   1. benchmarks/seed_batch.py at S = 1, 8, 32, 128 seeds (Finetune, smoke curriculum,
#      the same budget as the CPU table in BENCHMARKS.md), three separate processes
#      measured and the rest counted at their warm mean;
#   2. one cell of the Table 1 study as the study ran it: Finetune, five seeds as one
#      batch, primary curriculum, study preset (2-core CPU: 0.38 h), its progress log kept.
# Each stage has its own time limit, so the call ends with what it measured.
#   bash benchmarks/gpu_seeds.sh [RESULTS_DIR]
set -uo pipefail
out=${1:-benchmarks/results}
py=${PYTHON:-python3}
mkdir -p "$out"
export TELAPA_JAX_CACHE=${TELAPA_JAX_CACHE:-/tmp/telapa-jax-cache}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$py" -c "import jax; print('jax', jax.__version__, jax.devices())"

timeout "${SEED_BATCH_S:-300}" "$py" benchmarks/seed_batch.py --sizes 1 8 32 128 \
    --separate 3 --steps-per-visit 245760 --out "$out/seed_batch.gpu.json"
echo "seed_batch exit $?"

run=$(mktemp -d)/study-finetune
start=$(date +%s)
timeout "${STUDY_CELL_S:-220}" "$py" -m telapa.cli run --curriculum primary --method finetune \
    --preset study --seeds 0-4 --out "$run" --log-interval 10 2> "$out/study_finetune.gpu.log"
echo "study cell exit $? after $(( $(date +%s) - start )) s"
tail -n 5 "$out/study_finetune.gpu.log"
