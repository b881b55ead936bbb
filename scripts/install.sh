#!/usr/bin/env bash
# Install foxhunt into the current Python environment, CPU-only unless CUDA is asked for.
#   bash scripts/install.sh          # foxhunt + runtime dependencies
#   bash scripts/install.sh --test   # + test tools and the example out-of-tree plugin
#   bash scripts/install.sh --cuda   # + numba-cuda (on a machine with an NVIDIA GPU)
# PyPI's default torch wheel for Linux pulls several GB of CUDA libraries; a CPU machine
# needs none of that, so torch's CPU build is installed first, from a local wheel when the
# machine has one (pip's find-links) or else from PyTorch's CPU index.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
extras=()
for arg in "$@"; do
  case "$arg" in
    --test) extras+=(test) ;;
    --cuda) extras+=(cuda) ;;
    *) echo "unknown option $arg (use --test and/or --cuda)" >&2; exit 2 ;;
  esac
done
if ! "$PY" -c "import torch" 2>/dev/null; then
  "$PY" -m pip install -q "torch==2.13.0+cpu" \
    || "$PY" -m pip install -q torch --index-url https://download.pytorch.org/whl/cpu
fi
spec="."
if [ ${#extras[@]} -gt 0 ]; then spec=".[$(IFS=,; echo "${extras[*]}")]"; fi
"$PY" -m pip install -q -e "$spec"
for extra in "${extras[@]}"; do
  if [ "$extra" = test ] && [ -d examples/huber-loss-plugin ]; then
    "$PY" -m pip install -q -e examples/huber-loss-plugin
  fi
done
echo "foxhunt installed: $("$PY" -c 'import foxhunt; print(foxhunt.__version__)')"
