#!/usr/bin/env bash
# Everything tiledsl checks and measures on a GPU, in one call of the device tool (see
# /work/.library/device/README.md): install what the GPU image lacks from carried wheels, build
# tiledsl (the C++ simulator too), then run the steps named (default: all but `suite`) and leave
# logs and JSON reports in $OUT.
#
#   bash benchmarks/gpu_session.sh [gpu-tests] [tune] [tune-noprune] [kernels] [finalists] [suite]
#
#   gpu-tests  pytest -m gpu tests/            (the GPU paths: launch, torch ops, export)
#   tune       benchmarks/tune_gpu.py           (a cold 40-trial 4096^3 fp16 GEMM tune vs cuBLAS)
#   tune-noprune  the same tune timing every config (what the cost model's pruning saves)
#   kernels    benchmarks/gpu_kernels.py --quick (kernels vs cuBLAS/torch, ceilings measured)
#   finalists  benchmarks/finalists.py --backend triton --kernels matmul --runs 5
#   suite      the whole test suite under the image's versions (slowest; not in the default)
#
# The wheels (the GPU image has no optuna and no jsonschema; nothing can be fetched there) are
# made on a machine with pip, in the repository root, into .whl/ (ignored by git):
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 -d .whl optuna alembic sqlalchemy colorlog Mako \
#     greenlet cmaes jsonschema jsonschema-specifications referencing rpds-py \
#     scikit-build-core pybind11
# and the call names it: run(command="bash benchmarks/gpu_session.sh", carry=[".whl"]). One call
# may run 10 minutes: split the steps over calls where they would take longer (setup, about 15 s,
# is repeated by each), e.g. "gpu-tests tune tune-noprune" then "kernels finalists". Each step
# stops after STEP_TIMEOUT seconds (default 420).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/tiledsl-gpu-session}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(gpu-tests tune tune-noprune kernels finalists)
status=0

step() {  # name, then the command; its log goes to $OUT/<name>.log
    local name=$1; shift
    local t0=$SECONDS
    echo "== $name: $*"
    if timeout "${STEP_TIMEOUT:-420}" "$@" >"$OUT/$name.log" 2>&1; then
        echo "   ok in $((SECONDS - t0)) s"
    else
        echo "   FAILED (exit $?) in $((SECONDS - t0)) s; the end of $OUT/$name.log:"
        tail -25 "$OUT/$name.log" | sed 's/^/   | /'
        status=1
    fi
}

setup() {
    if compgen -G ".whl/*.whl" >/dev/null; then
        $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site .whl/*.whl || return 1
    fi
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    # The project with its C++ simulator, next to the wheels (its entry points register the
    # backends); no index, no build isolation: the build tools come from the image or .whl.
    $PY -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade \
        --target /tmp/site . || return 1
    $PY - <<'EOF'
import importlib.metadata as md, platform
import torch, triton, numpy, tiledsl, _tiledsl_sim  # noqa: F401  (the build worked)
print("python", platform.python_version(), "| torch", torch.__version__, "| triton",
      triton.__version__, "| numpy", numpy.__version__, "| optuna", md.version("optuna"))
print("gpu:", torch.cuda.get_device_name() if torch.cuda.is_available() else "none")
EOF
}

echo "== setup"
setup 2>&1 | tee "$OUT/setup.log" | tail -4
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "setup failed"; exit 1; }
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv \
    >"$OUT/nvidia-smi.csv" 2>&1 || true
for s in "${steps[@]}"; do
    case $s in
        gpu-tests) step gpu-tests $PY -m pytest -m gpu tests/ -rs -p no:cacheprovider ;;
        tune) step tune $PY benchmarks/tune_gpu.py --out "$OUT/tune_gpu_triton.json" ;;
        tune-noprune) step tune-noprune $PY benchmarks/tune_gpu.py --prune 0 \
                          --out "$OUT/tune_gpu_triton_noprune.json" ;;
        kernels) step kernels $PY benchmarks/gpu_kernels.py --quick --out "$OUT/gpu_kernels.json" ;;
        finalists) step finalists $PY benchmarks/finalists.py --backend triton --kernels matmul \
                       --runs 5 --out "$OUT/finalists_triton.json" ;;
        suite) step suite $PY -m pytest tests/ -x -p no:cacheprovider ;;
        *) echo "unknown step: $s"; exit 2 ;;
    esac
done
for f in "$OUT"/*.log; do  # the tables each step printed last
    echo "---- $(basename "$f")"; tail -12 "$f"
done
exit $status
