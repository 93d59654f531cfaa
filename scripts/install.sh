#!/usr/bin/env bash
# Install glm53 into .venv from the exact versions in requirements.lock.
#   bash scripts/install.sh          the package
#   bash scripts/install.sh --dev    the package and the test tools
# Linux without an NVIDIA GPU: torch comes from PyTorch's CPU-only index when it can be reached (~200 MB instead
# of several GB of CUDA libraries). With a GPU, PyPI's CUDA build. GLM53_TORCH_INDEX=URL chooses another index
# (for example https://download.pytorch.org/whl/cu126); GLM53_TORCH_INDEX= (empty) uses PyPI's default build.
set -euo pipefail
cd "$(dirname "$0")/.."
extra=()
if [ "${1:-}" = "--dev" ]; then extra=("[dev]"); fi
python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
index_args=()
if [ -n "${GLM53_TORCH_INDEX+set}" ]; then
  [ -n "$GLM53_TORCH_INDEX" ] && index_args=(--extra-index-url "$GLM53_TORCH_INDEX")
elif [ "$(uname -s)" = Linux ] && ! command -v nvidia-smi >/dev/null 2>&1; then
  cpu_index=https://download.pytorch.org/whl/cpu
  if python - "$cpu_index" <<'PY' 2>/dev/null; then index_args=(--extra-index-url "$cpu_index"); fi
import sys, urllib.request
urllib.request.urlopen(sys.argv[1] + "/torch/", timeout=5)
PY
fi
python -m pip install -q ${index_args[@]+"${index_args[@]}"} -r requirements.lock
python -m pip install -q --no-deps -e ".${extra[*]:-}"
echo "installed glm53 into .venv (torch $(python -c 'import torch; print(torch.__version__)')); activate with: . .venv/bin/activate"
