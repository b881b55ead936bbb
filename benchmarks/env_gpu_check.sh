#!/usr/bin/env bash
# The environment's CUDA path on an NVIDIA GPU: kernel tests on the real GPU, CUDA-vs-CPU and
# CUDA-graph checks, then the throughput table (CUDA, then CPU). Run from anywhere:
#   bash benchmarks/env_gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# Wheels the GPU image lacks, carried in .whl/: numpy<2.5 as pyproject pins it (numba-cuda still
# calls np.row_stack, gone in numpy 2.5) and, without an installed foxhunt, structlog and cattrs;
# the repository root on PYTHONPATH makes foxhunt and foxhunt_plugins importable.
mkdir -p /tmp/foxhunt_site
wheels=""
if ! python3 -c "import numpy, sys; sys.exit(tuple(map(int, numpy.__version__.split('.')[:2])) >= (2, 5))"; then
    wheels="$(ls .whl/numpy-2.4*.whl 2>/dev/null || true)"
fi
if ! python3 -c "import structlog, cattrs" 2>/dev/null; then
    wheels="$wheels $(ls .whl/structlog-*.whl .whl/cattrs-*.whl 2>/dev/null || true)"
fi
if [ -n "${wheels// /}" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/foxhunt_site $wheels
fi
export PYTHONPATH="$PWD:/tmp/foxhunt_site${PYTHONPATH:+:$PYTHONPATH}"
unset NUMBA_ENABLE_CUDASIM
nvidia-smi -L
python3 -c "import numpy, numba, torch; print('numpy', numpy.__version__, numpy.__file__, 'numba', numba.__version__, 'torch', torch.__version__)"

python3 -m pytest -q -p no:cacheprovider tests/kernels tests/env tests/builtin_plugins/test_market_env.py
python3 benchmarks/env_gpu_check.py
python3 benchmarks/env.py --device cuda
python3 benchmarks/env.py --device cpu
