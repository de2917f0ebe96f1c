#!/usr/bin/env bash
# Everything tiledsl checks and measures on a GPU, in ONE call of the device tool (see
# /work/.library/device/README.md): install what the GPU image lacks from carried wheels, build
# tiledsl (the C++ simulator too), then run the steps, most valuable first, each writing its
# JSON as soon as it is done, so a call cut off at its limit still returns the first results.
#
#   bash benchmarks/gpu_session.sh [STEP...]    # default: all but `suite`, in this order
#
#   ceilings   benchmarks/gpu_ceilings.py: copy bandwidth (4 GiB moved), cuBLAS bf16/fp16 8192^3
#   gpu-tests  pytest -m gpu on the test files that have GPU tests (launch paths, torch ops on
#              CUDA under torch.compile, exported packages through CuPy, a small GPU tune)
#   gemm       benchmarks/gpu_kernels.py gemm: fp16/bf16 GEMM at 4096^3, 8192^3 and two LLM
#              shapes, GEMM+bias+GELU: the default and the cost model's top 8 against cuBLAS
#   rows       benchmarks/gpu_kernels.py rows: softmax, layer norm, RMS norm against the copy
#              ceiling and torch; causal attention forward against torch's SDPA
#   dispatch   benchmarks/call_overhead.py --gpu-only: k(*args) against a bare @triton.jit launch
#   tune       benchmarks/tune_gpu.py: a cold 40-trial 4096^3 fp16 GEMM tune against cuBLAS
#   suite      the whole test suite under the image's versions (slow; not in the default)
#
# What comes back from $OUT (the tool returns at most 8 files): session.log (setup, the GPU's
# state, every step's output), ceilings.json, gpu_tests.xml, gemm.json, rows.json,
# dispatch.json, tune.json.
#
# The wheels (the GPU image has no optuna and no jsonschema; nothing can be fetched there) are
# made on a machine with pip, in the repository root, into .whl/ (ignored by git):
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 -d .whl optuna alembic sqlalchemy colorlog Mako \
#     greenlet cmaes jsonschema jsonschema-specifications referencing rpds-py \
#     scikit-build-core pybind11
# and the call names it: run(command="bash benchmarks/gpu_session.sh", carry=[".whl"],
# timeout_s=480). The steps share BUDGET seconds (default 420, counted from the start of this
# script, setup included): each may run its weight's share of what is left when it starts (a
# step that ends early leaves its time to the next); one whose share is under MIN_STEP seconds
# (default 10) is skipped. The benchmarks are told their limit, so they stop starting work in
# time to write their reports.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/tiledsl-gpu-session}
mkdir -p "$OUT"
LOG=$OUT/session.log
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
BUDGET=${BUDGET:-420}
ALL=(ceilings gpu-tests gemm rows dispatch tune)
declare -A WEIGHT=([ceilings]=2 [gpu-tests]=4 [gemm]=3 [rows]=3 [dispatch]=1 [tune]=4 [suite]=8)
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=("${ALL[@]}")
for s in "${steps[@]}"; do
    [ -n "${WEIGHT[$s]:-}" ] || { echo "unknown step: $s (steps: ${ALL[*]} suite)"; exit 2; }
done
status=0

say() { echo "$*" | tee -a "$LOG"; }

limit() {  # the seconds step $1 may run: its weight's share of what is left for it and the rest
    local rest=0 s
    for s in "${todo[@]}"; do rest=$((rest + WEIGHT[$s])); done
    echo $(((BUDGET - SECONDS) * WEIGHT[$1] / rest))
}

step() {  # name, its time limit in seconds, then the command; its output goes to the log
    local name=$1 seconds=$2; shift 2
    local t0=$SECONDS
    if [ "$seconds" -lt "${MIN_STEP:-10}" ]; then
        say "== $name: SKIPPED, $seconds s left of the call's $BUDGET s (BUDGET)"
        status=1
        return
    fi
    say "== $name (at most $seconds s, at $SECONDS s): $*"
    if timeout -k 10 "$seconds" "$@" >>"$LOG" 2>&1; then
        say "   ok in $((SECONDS - t0)) s"
    else
        say "   FAILED (exit $?) in $((SECONDS - t0)) s; the end of its output:"
        tail -25 "$LOG" | sed 's/^/   | /'
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
    CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) $PY -m pip install -q --no-index --no-deps \
        --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . || return 1
    $PY - <<'EOF'
import importlib.metadata as md, platform
import torch, triton, numpy, tiledsl, _tiledsl_sim  # noqa: F401  (the build worked)
print("python", platform.python_version(), "| torch", torch.__version__, "| triton",
      triton.__version__, "| numpy", numpy.__version__, "| optuna", md.version("optuna"))
print("gpu:", torch.cuda.get_device_name() if torch.cuda.is_available() else "none")
EOF
}

gpu_state() {
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
        --format=csv >>"$LOG" 2>&1 || say "(no nvidia-smi)"
}

say "== setup (at $(date -u +%FT%TZ))"
setup >>"$LOG" 2>&1 || { tail -30 "$LOG"; echo "setup failed"; exit 1; }
tail -2 "$LOG"
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
say "   setup done in $SECONDS s"
gpu_state
# the test files with GPU tests (marked, or with the "triton-gpu" test backend of
# tests/support.py), in parallel where pytest-xdist is installed (the image has it)
mapfile -t gpu_test_files < <(grep -rlE "pytest.mark.gpu|gpu_backend\(\)" --include="test_*.py" tests | sort)
parallel=()
$PY -c "import xdist" 2>/dev/null && parallel=(-n 8)
todo=("${steps[@]}")
for s in "${steps[@]}"; do
    t=$(limit "$s")
    todo=("${todo[@]:1}")
    case $s in
        ceilings) step ceilings "$t" $PY benchmarks/gpu_ceilings.py --out "$OUT/ceilings.json" ;;
        gpu-tests) step gpu-tests "$t" $PY -m pytest -m gpu -v -rs -p no:cacheprovider \
                       "${parallel[@]}" --junitxml="$OUT/gpu_tests.xml" "${gpu_test_files[@]}" ;;
        gemm|rows) step "$s" "$t" $PY benchmarks/gpu_kernels.py "$s" --timeout $((t - 20)) \
                       --ceilings "$OUT/ceilings.json" --out "$OUT/$s.json" ;;
        dispatch) step dispatch "$t" $PY benchmarks/call_overhead.py --gpu-only --profile \
                      --out "$OUT/dispatch.json" ;;
        # the search stops 60 s before the limit (half of it when short): the finalists,
        # cuBLAS and the model check follow it
        tune) step tune "$t" $PY benchmarks/tune_gpu.py --timeout $((t > 120 ? t - 60 : t / 2)) \
                  --out "$OUT/tune.json" ;;
        suite) step suite "$t" $PY -m pytest tests/ -x -p no:cacheprovider ;;
    esac
done
gpu_state
say "== done in $SECONDS s of BUDGET=$BUDGET"
grep -E "^(== |   ok|   FAILED|=+ .*(passed|failed|error)|copy|cublas|gemm|softmax|layer_norm|rms_norm|causal|GPU |matmul)" \
    "$LOG" | tail -60
exit $status
