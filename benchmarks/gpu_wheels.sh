#!/usr/bin/env bash
# Downloads, here, the wheels that benchmarks/gpu_study.sh installs on the GPU machine:
# the packages `telapa run` imports that the device image (Python 3.12, JAX 0.11) lacks
# (tensorboardX: every run opens its TensorBoard sink; MuJoCo and MJX: the MuJoCo stage),
# at the versions of requirements.lock. They land in .whl/, which git ignores through
# .git/info/exclude (added here), and travel with `carry: [".whl"]`.
#   bash benchmarks/gpu_wheels.sh
set -euo pipefail
cd "$(dirname "$0")/.."
exclude=$(git rev-parse --git-path info/exclude)
grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >> "$exclude"
grep -qx '/.gpu_study/' "$exclude" 2>/dev/null || echo '/.gpu_study/' >> "$exclude"
packages=(pydantic pydantic_core annotated-types typing-inspection typing_extensions
          gymnasium Farama-Notifications tensorboardX
          # the MuJoCo stage: MuJoCo and its MJX port (telapa.envs.mujoco.mjx_env)
          mujoco mujoco-core mujoco-studio glfw PyOpenGL mujoco-mjx trimesh etils absl-py
          fsspec importlib_metadata zipp)
pins=()
for name in "${packages[@]}"; do
  pin=$(grep -i "^${name}==" requirements.lock) || { echo "no pin for $name" >&2; exit 1; }
  pins+=("$pin")
done
mkdir -p .whl
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .whl "${pins[@]}"
ls -l .whl
