#!/usr/bin/env bash
# Throughput on an accelerator: the env and PPO benchmarks at GPU-sized batches, with the
# references (Farama MiniGrid, Stable-Baselines3) measured on the same machine's CPU.
#   bash benchmarks/gpu.sh [RESULTS_DIR]
set -euo pipefail
out=${1:-benchmarks/results}
"${PYTHON:-python3}" benchmarks/env_throughput.py --batch-sizes 512 8192 65536 \
    --ids MiniGrid-DoorKey-8x8-v0 MiniGrid-MultiRoom-N2-S4-v0 --out "$out/env_throughput.gpu.json"
"${PYTHON:-python3}" benchmarks/ppo_throughput.py --shapes 1024x64x1 4096x32x1 --out "$out/ppo_throughput.gpu.json"
