#!/usr/bin/env bash
# Issue 25's GPU measurement in ONE device call of at most 9 minutes (timeout_s 540):
#   run(command="bash benchmarks/gpu_study.sh", carry=[".whl", ".gpu_study"], timeout_s=540)
# 1. installs the packages the GPU image lacks (pydantic, gymnasium and their needs) from
#    the wheels in .whl/, made here beforehand by `bash benchmarks/gpu_wheels.sh`;
# 2. runs benchmarks/gpu_study.py inside a budget of GPU_STUDY_BUDGET_S (default 470) s:
#    the visit program of Finetune on the study preset at S = 1, 8, 64, 256, then as many
#    Table 1 study cells (10 methods x 5 seeds, primary curriculum) as fit;
# 3. leaves $OUT/gpu_study.json (rows with seeds, env_steps_per_s, the card) and
#    $OUT/gpu_study_state.tar.gz, the state of the next call: here,
#      rm -rf .gpu_study && mkdir .gpu_study && tar -xzf FILES_AT/gpu_study_state.tar.gz -C .gpu_study
#    then call again (measured sizes and finished cells are skipped, a stopped cell
#    resumes).
# Commit gpu_study.json to benchmarks/results/ with the card it names.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-study-out}
mkdir -p "$OUT"
py=${PYTHON:-python3}
if compgen -G ".whl/*.whl" > /dev/null; then
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD/src
else
  export PYTHONPATH=$PWD/src
fi
export TELAPA_JAX_CACHE=${TELAPA_JAX_CACHE:-/tmp/telapa-jax-cache}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$py" -c "import jax, telapa; print('jax', jax.__version__, jax.devices())" || exit 1
"$py" benchmarks/gpu_study.py --out-dir "$OUT" --budget-s "${GPU_STUDY_BUDGET_S:-470}" "$@" \
  2>&1 | tee "$OUT/gpu_study.log"
