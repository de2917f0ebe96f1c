"""Call overhead of `k(*args)` on a cached kernel: what tiledsl adds on top of the work itself.

    python benchmarks/call_overhead.py [--gpu-only] [--profile] [--out FILE]

CPU (always): the dispatch path of `k(*args)` (argument binding and checks, the dispatch cache,
the result-cache memo) measured as `k(*args)` minus calling the NumPy backend's `run` directly
on the same lowered function and config; also through torch CPU tensors (DLPack views) and a
`td.torch_op` custom op. Target: under 20 us.

GPU (when torch sees a CUDA device): `k(*args)` on torch CUDA tensors against launching the
generated `@triton.jit` kernel directly with a preallocated output. Target: under 10 us extra.

`--profile` prints where `k(*args)`'s time goes on the GPU case (cProfile, by own time).

Each number is the median over 15 batches of the per-call time (tiny inputs, so the work is
small and the overhead shows); differences are of medians measured in the same run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from support import example  # noqa: E402
from outputs import out_help, out_path  # noqa: E402  (benchmarks/outputs.py)

import tiledsl as td  # noqa: E402
from tiledsl.runtime import registry  # noqa: E402


def per_call_us(fn: Callable[[], Any], calls: int = 2000, batches: int = 15,
                sync: Callable[[], None] = lambda: None) -> float:
    fn()
    sync()
    times = []
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def direct_numpy(k: Any, args: tuple) -> Callable[[], Any]:
    """The NumPy backend's run on the already lowered function and chosen config."""
    values = list(args)
    spec = k.arg_spec(values)
    space = k.space(spec, "numpy")
    config = k.tuned_config(values, spec, "numpy", None, space) or space.default()
    lowered = k.traces.get(spec).lowered
    impl = registry.backend("numpy")
    return lambda: impl.run(lowered, values, config)


def cpu_rows() -> list[dict[str, Any]]:
    import torch

    rows = []
    rng = np.random.default_rng(0)
    cases = {
        "vector_add n=16": (example("vector_add").vector_add,
                            (rng.standard_normal(16).astype(np.float32),) * 2),
        "matmul 8x8x8": (example("matmul").matmul,
                         (rng.standard_normal((8, 8)).astype(np.float32),) * 2),
    }
    for name, (k, args) in cases.items():
        base = per_call_us(direct_numpy(k, args))
        call = per_call_us(lambda: k(*args))
        targs = tuple(torch.from_numpy(a) for a in args)
        via_torch = per_call_us(lambda: k(*targs))
        op = td.torch_op(k, name=f"bench::{k.name}")
        via_op = per_call_us(lambda: op(*targs))
        rows.append({"case": name, "backend_run_us": base, "call_us": call,
                     "dispatch_overhead_us": call - base, "torch_cpu_call_us": via_torch,
                     "torch_cpu_overhead_us": via_torch - base, "torch_op_us": via_op,
                     "torch_op_overhead_us": via_op - base})
    return rows


def gpu_rows(profile: bool = False) -> list[dict[str, Any]]:
    import torch

    from lowering.backends.triton.codegen import generate_cached
    from lowering.backends.triton.interpret import strides_of
    from lowering.backends.triton.loader import load

    k = example("vector_add").vector_add
    x = torch.randn(4096, device="cuda")
    y = torch.randn(4096, device="cuda")
    values = [x, y]
    spec = k.arg_spec(values)
    space = k.space(spec, "triton")
    config = space.default()
    lowered = k.traces.get(spec).for_backend("triton")
    module_src = generate_cached(lowered, config, strides_of(lowered, values))
    module = load(module_src.source, interpret=False)
    gk = module_src.kernels[0]
    jit = getattr(module, gk.name)
    out = torch.empty_like(x)
    blocks = {p.name: p.value for p in gk.params if p.kind == "block"}
    direct = per_call_us(lambda: jit[(gk.programs,)](x, y, out, **blocks,
                                                     num_warps=gk.num_warps,
                                                     num_stages=gk.num_stages),
                         sync=torch.cuda.synchronize)
    call = per_call_us(lambda: k(x, y), sync=torch.cuda.synchronize)
    if profile:
        import cProfile
        import pstats
        with cProfile.Profile() as prof:
            for _ in range(3000):
                k(x, y)
            torch.cuda.synchronize()
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
    return [{"case": "vector_add n=4096 (torch CUDA)", "direct_jit_us": direct, "call_us": call,
             "overhead_us": call - direct}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help=out_help("call_overhead.json"))
    parser.add_argument("--gpu-only", action="store_true", help="skip the CPU cases")
    parser.add_argument("--profile", action="store_true", help="profile k(*args) on the GPU")
    opts = parser.parse_args()
    out = out_path(opts.out, "call_overhead.json")
    import torch

    cpu = [] if opts.gpu_only else cpu_rows()
    print(f"{'CPU case':18} {'backend run':>12} {'k(*args)':>10} {'overhead':>9} "
          f"{'torch in':>9} {'overhead':>9} {'torch_op':>9} {'overhead':>9}   (us per call)")
    for r in cpu:
        print(f"{r['case']:18} {r['backend_run_us']:12.1f} {r['call_us']:10.1f} "
              f"{r['dispatch_overhead_us']:9.1f} {r['torch_cpu_call_us']:9.1f} "
              f"{r['torch_cpu_overhead_us']:9.1f} {r['torch_op_us']:9.1f} "
              f"{r['torch_op_overhead_us']:9.1f}")
    gpu: list[dict[str, Any]] = []
    if torch.cuda.is_available():
        gpu = gpu_rows(opts.profile)
        for r in gpu:
            print(f"GPU {r['case']}: direct @triton.jit {r['direct_jit_us']:.1f} us, "
                  f"k(*args) {r['call_us']:.1f} us, overhead {r['overhead_us']:.1f} us")
    else:
        print("GPU: no CUDA device here, not measured")
    out.write_text(json.dumps({
        "benchmark": "call_overhead", "date": datetime.datetime.now(
            datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "numpy": np.__version__, "torch": torch.__version__,
                    "device": torch.cuda.get_device_name() if gpu else "cpu"},
        "cpu": cpu, "gpu": gpu}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
