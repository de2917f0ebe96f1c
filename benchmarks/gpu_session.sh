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
#   finalists  benchmarks/finalists.py --backend triton --kernels matmul --runs 5, on a 2048^3
#              fp16 GEMM (the example's own 150x100x90 takes microseconds on a GPU)
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
# may run 10 minutes and bring back 8 files of $OUT (each step leaves a log, most a JSON report
# too): split the steps over calls, e.g. "gpu-tests tune tune-noprune" then "kernels finalists"
# (setup, about 15 s, is repeated by each). The steps of one call share BUDGET seconds (default
# 570, counted from the start of this script): each step may run an equal share of what is left
# when it starts (a step that ends early leaves its time to the next), at most STEP_TIMEOUT
# seconds (default 420); one whose share is under MIN_STEP seconds (default 60) is skipped. The
# tunes and the finalists benchmark are told their limit, so they stop searching in time to
# write their reports.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/tiledsl-gpu-session}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(gpu-tests tune tune-noprune kernels finalists)
status=0

BUDGET=${BUDGET:-570}

limit() {  # the seconds the next step may run: its share of what is left, at most STEP_TIMEOUT
    local share=$(((BUDGET - SECONDS) / $1)) most=${STEP_TIMEOUT:-420}
    echo $((share < most ? share : most))
}

step() {  # name, its time limit in seconds, then the command; its log goes to $OUT/<name>.log
    local name=$1 seconds=$2; shift 2
    local t0=$SECONDS
    if [ "$seconds" -lt "${MIN_STEP:-60}" ]; then
        echo "== $name: SKIPPED, $seconds s left of the call's $BUDGET s (BUDGET)"
        echo "skipped: $seconds s left of BUDGET=$BUDGET" >"$OUT/$name.log"
        status=1
        return
    fi
    echo "== $name (at most $seconds s): $*"
    if timeout -k 15 "$seconds" "$@" >"$OUT/$name.log" 2>&1; then
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
    case $s in gpu-tests|tune|tune-noprune|kernels|finalists|suite) ;;
        *) echo "unknown step: $s"; exit 2 ;;
    esac
done
todo=${#steps[@]}
for s in "${steps[@]}"; do
    t=$(limit "$todo")
    todo=$((todo - 1))
    case $s in
        gpu-tests) step gpu-tests "$t" $PY -m pytest -m gpu tests/ -rs -p no:cacheprovider ;;
        # the search stops 120 s before the limit (half of it when short): the finalists,
        # cuBLAS and the model check (a process pool compiling for the H100 model) follow it
        tune) step tune "$t" $PY benchmarks/tune_gpu.py --timeout $((t > 240 ? t - 120 : t / 2)) \
                  --out "$OUT/tune_gpu_triton.json" ;;
        tune-noprune) step tune-noprune "$t" $PY benchmarks/tune_gpu.py --prune 0 \
                          --timeout $((t > 240 ? t - 120 : t / 2)) \
                          --out "$OUT/tune_gpu_triton_noprune.json" ;;
        kernels) step kernels "$t" $PY benchmarks/gpu_kernels.py --quick \
                     --out "$OUT/gpu_kernels.json" ;;
        finalists) step finalists "$t" $PY benchmarks/finalists.py --backend triton \
                       --kernels matmul --dims m=2048,k=2048,n=2048 --dtype f16 --runs 5 \
                       --timeout $((t > 90 ? t - 45 : t / 2)) \
                       --out "$OUT/finalists_triton.json" ;;
        suite) step suite "$t" $PY -m pytest tests/ -x -p no:cacheprovider ;;
    esac
done
for f in "$OUT"/*.log; do  # the tables each step printed last
    echo "---- $(basename "$f")"; tail -12 "$f"
done
exit $status
