"""tiledsl's Triton kernels against cuBLAS and torch on a GPU: the default config and the cost
model's favourites, each checked and timed.

    python benchmarks/gpu_kernels.py {gemm,rows} [--quick] [--ceilings FILE] [--timeout S]
                                     [--repeats N] [--out FILE]
    python benchmarks/gpu_kernels.py compile-only [--quick] [--out FILE]

The cases are in benchmarks/gpu_cases.py. Each case's candidates are its config space's default
and the cost model's favourites (the case's `top` lowest `estimate`s, one config per distinct
estimate, ties broken towards the default), plus changes to the default the model prices the
same (TMA, a persistent grid; 4 warps for attention). A process pool (the tuner's compile
workers, autotune/precompile.py) ranks each space and compiles every candidate into Triton's
cache while the GPU times earlier ones.

Each candidate's first call is checked against torch's float32 result (the memory its output
will take poisoned with NaN first); a wrong one is not timed. The others are timed with CUDA
events, L2 flushed before each repeat: median and spread. Per case: the default's and the
best's time, TFLOP/s or GB/s, fraction of the ceilings gpu_ceilings.py measured (`--ceilings`),
ratio to the baseline timed in the same run, and the rank correlation of the model's estimates
with the measured times. The report is saved after each case; `--timeout` stops starting cases.

Without a GPU, gemm and rows still rank and compile every candidate for sm_90 (a dry run of all
but the timing); `compile-only` reports each case's default config: code generation time,
compile time, registers, spills and shared memory.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import time
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from gpu_cases import (PARTS, Case, Float32Normal, baseline, example_module,  # noqa: E402
                       reference, reference_launches, relative_error, within)
from gpu_report import Report, spread_ms  # noqa: E402
from outputs import out_help, out_path  # noqa: E402  (benchmarks/outputs.py)

from autotune.isolate import adopt_environment, cache_environment  # noqa: E402
from autotune.precompile import ArrayLayout, compile_config, default_workers  # noqa: E402
from tiledsl.runtime.config import Config, ConfigSpace  # noqa: E402

COMPILE_WAIT_S = 300  # a compile not done by then is left to the launch
Candidate = tuple[Config, "float | None", Future]


def favourites(space: ConfigSpace, top: int, variants: tuple = ()
               ) -> list[tuple[Config, float | None]]:
    """The default, the model's `top` favourites (one per distinct estimate: configs it prices
    the same teach it nothing new; among them the one nearest the default), then `variants`
    (changes to the default) that the space admits."""
    default = space.default()
    estimate = space.estimate
    picked = [default]
    if estimate is not None and top > 0:
        base = space.values(default)
        priced = sorted((estimate(c), sum(v != base[k] for k, v in space.values(c).items()), i, c)
                        for i, c in enumerate(space) if space.duplicate(c) is None)
        seen = {round(estimate(default), 6)}
        for value, _, _, config in priced:
            if len(picked) > top:
                break
            if round(value, 6) not in seen:
                seen.add(round(value, 6))
                picked.append(config)
    for changes in variants:
        config = default.replace(**dict(changes))
        if config in space and config not in picked:
            picked.append(config)
    return [(c, estimate(c) if estimate is not None else None) for c in picked]


def rank(file: str, name: str, layouts: list[Any], top: int, variants: tuple
         ) -> list[tuple[dict, float | None]]:
    """`favourites` of a kernel's Triton space (in a worker: it takes seconds for a GEMM)."""
    from autotune.runners import load_kernel
    args = [a.array() if isinstance(a, ArrayLayout) else a for a in layouts]
    space = load_kernel(file, name).config_space(*args, backend="triton")
    return [(c.to_dict(), e) for c, e in favourites(space, top, variants)]


class Workers:
    """The compile pool: ranks each case's space, then compiles its candidates for `arch`."""

    def __init__(self, arch: str, num_sms: int | None) -> None:
        self.arch, self.num_sms = arch, num_sms
        self.pool = ProcessPoolExecutor(default_workers(), mp_context=mp.get_context("spawn"),
                                        initializer=adopt_environment,
                                        initargs=(cache_environment(),))

    def plan(self, cases: list[Case]) -> list[tuple[list[Any], list[Candidate]]]:
        """Each case's host inputs and candidates, their compiles queued in case order."""
        inputs, layouts, ranked = [], [], []
        for case in cases:
            args = list(example_module(case.example).make_inputs(Float32Normal(0), case.dims,
                                                                 case.dtype))
            inputs.append(args)
            layouts.append([ArrayLayout.of(a) for a in args])
            ranked.append(self.pool.submit(rank, file_of(case), case.example, layouts[-1],
                                           case.top, case.variants))
        plans = []
        for case, args, lay, future in zip(cases, inputs, layouts, ranked):
            candidates = []
            for config, estimate in future.result():
                compiled = self.pool.submit(compile_config, file_of(case), case.example, lay,
                                            config, "jit", self.arch, self.num_sms)
                candidates.append((Config.from_dict(config), estimate, compiled))
            plans.append((args, candidates))
        return plans

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def file_of(case: Case) -> str:
    return str(ROOT / "examples" / f"{case.example}.py")


def compiled(future: Future) -> dict:
    """What the compile worker said: its error, or the model's price of what it compiled."""
    try:
        error, predicted = future.result(timeout=COMPILE_WAIT_S)
    except Exception as e:  # noqa: BLE001 - a worker that died or hangs: the launch compiles
        return {"worker": f"{type(e).__name__}: {e}"}
    return {"error": f"compile: {error}"} if error else {"predicted_us": predicted}


def time_config(kernel: Any, targs: list[Any], ref: Any, case: Case, config: Config,
                repeats: int) -> dict:
    """Check one candidate's first call against `ref`, then time it."""
    import torch
    torch.full(tuple(ref.shape), float("nan"), dtype=targs[0].dtype, device="cuda")  # freed:
    start = time.perf_counter()  # the output's allocation gets this poisoned block back

    def run() -> Any:
        return kernel.run(*targs, backend="triton", config=config)
    out = run()
    torch.cuda.synchronize()
    row: dict[str, Any] = {"first_call_s": round(time.perf_counter() - start, 3)}
    row["rel_err"] = err = relative_error(out, ref)
    del out
    if not within(err, case.dtype):
        return {**row, "error": f"wrong result: relative error {err:.2e}"}
    return {**row, **spread_ms(run, repeats)}


def time_case(case: Case, args: list[Any], candidates: list[Candidate], repeats: int,
              ceilings: dict, deadline: float) -> dict:
    from autotune.runners import to_device
    targs = to_device(args)
    ref = reference(case.example, targs)
    base_name, base = baseline(case.example, targs)
    row: dict[str, Any] = {"case": case.name, "dims": case.dims,
                           "dtype": np.dtype(case.dtype).name, "baseline_name": base_name,
                           "baseline": rates(case, spread_ms(base, repeats), ceilings)}
    kernel = getattr(example_module(case.example), case.example)
    tried = row["candidates"] = []
    for config, estimate, future in candidates:
        if time.monotonic() > deadline:
            row["stopped"] = "out of time"
            break
        entry = {"config": config.to_dict(), "estimate_us": estimate, **compiled(future)}
        if "error" not in entry:
            entry.update(Report.attempt(f"{case.name} {config}", lambda: time_config(
                kernel, targs, ref, case, config, repeats)))
        tried.append(entry)
    timed = [c for c in tried if "ms" in c]
    if timed and time.monotonic() < deadline:  # under the default's and the best's configs
        configs = [tried[0]["config"], min(timed, key=lambda c: c["ms"])["config"]]
        row["hand_written"] = [h for config in configs[:1 if configs[0] == configs[1] else 2]
                               for h in hand_written(case, targs, ref, config, repeats)]
    return summarize(row, case, ceilings)


def hand_written(case: Case, targs: list[Any], ref: Any, config: dict, repeats: int
                 ) -> list[dict]:
    """The hand-written reference kernels under the default's config, checked and timed as
    the candidates are."""
    try:
        launches = reference_launches(case.example, targs, Config.from_dict(config))
    except Exception as e:  # noqa: BLE001 - a shape or config the reference does not take
        return [{"error": f"{type(e).__name__}: {e}"}]
    out = []
    for label, launch in launches:
        out.append({"kernel": label, "config": config, **Report.attempt(
            f"{case.name} {label}", lambda: time_launch(launch, ref, case, repeats))})
    return out


def time_launch(launch: Any, ref: Any, case: Case, repeats: int) -> dict:
    launch.out.fill_(float("nan"))
    row: dict[str, Any] = {"rel_err": relative_error(launch.run(), ref)}
    if not within(row["rel_err"], case.dtype):
        return {**row, "error": f"wrong result: relative error {row['rel_err']:.2e}"}
    return {**row, **spread_ms(launch.run, repeats)}


def rates(case: Case, times: dict, ceilings: dict) -> dict:
    """`times` with the rate (TFLOP/s or GB/s) and its fraction of the matching ceiling."""
    out = dict(times)
    if case.flops:
        out["TFLOPs"] = case.flops / times["ms"] / 1e9
        label = "bf16" if np.dtype(case.dtype).name == "bfloat16" else "fp16"
        cublas = ceilings.get(f"cublas_{label}", {})
        if "TFLOPs" in cublas:
            out["of_cublas_8192"] = out["TFLOPs"] / cublas["TFLOPs"]
    else:
        out["GBps"] = case.bytes / times["ms"] / 1e6
        if "GBps" in ceilings.get("copy", {}):
            out["of_copy"] = out["GBps"] / ceilings["copy"]["GBps"]
    return out


def summarize(row: dict, case: Case, ceilings: dict) -> dict:
    """The default's and the best candidate's figures, and how the model ranked them."""
    timed = [c for c in row["candidates"] if "ms" in c]
    if not timed:
        row["error"] = "no candidate ran"
        return row
    base_ms = row["baseline"]["ms"]
    picks = {"default": row["candidates"][0], "best": min(timed, key=lambda c: c["ms"])}
    for key, pick in picks.items():
        if "ms" in pick:
            row[key] = {"config": pick["config"], **rates(case, pick, ceilings),
                        "baseline_over_this": base_ms / pick["ms"]}
    priced = [c for c in timed if c["estimate_us"] is not None]
    if len(priced) >= 3:
        from scipy.stats import spearmanr
        row["model_spearman"] = float(spearmanr([c["ms"] for c in priced],
                                                [c["estimate_us"] for c in priced]).statistic)
    return row


def line(row: dict) -> str:
    if "best" not in row:
        return f"{row['case']:44} {row.get('error', '?')}"
    best, base = row["best"], row["baseline"]
    hand = min((h["ms"] for h in row.get("hand_written", []) if "ms" in h), default=None)
    rate = f"{best['TFLOPs']:6.0f} TFLOP/s" if "TFLOPs" in best else f"{best['GBps']:6.0f} GB/s   "
    frac = best.get("of_cublas_8192", best.get("of_copy"))
    default = row.get("default", {}).get("ms")
    return (f"{row['case']:44} default {default or float('nan'):8.3f} best {best['ms']:8.3f} "
            f"[{best['min_ms']:.3f}, {best['max_ms']:.3f}] ms {rate} "
            f"{'' if frac is None else f'{frac:5.0%} of ceiling '}"
            f"baseline {base['ms']:8.3f} ms: x{best['baseline_over_this']:.2f}  "
            f"hand-written {hand or float('nan'):8.3f} ms  "
            f"spearman {row.get('model_spearman', float('nan')):+.2f}")


def run_part(cases: list[Case], opts: argparse.Namespace, report: Report, gpu: bool) -> None:
    """Plan every case (ranks and compiles in the pool), then time them in order on the GPU;
    without one, wait for the compiles and record what they said."""
    import json
    ceilings = json.loads(Path(opts.ceilings).read_text()).get("results", {}) \
        if opts.ceilings and Path(opts.ceilings).exists() else {}
    deadline = time.monotonic() + (opts.timeout or float("inf"))
    workers = Workers(*target(gpu))
    rows = report.data["results"] = []
    try:
        start = time.monotonic()
        plans = workers.plan(cases)
        report.data["ranked_s"] = round(time.monotonic() - start, 1)
        for case, (args, candidates) in zip(cases, plans):
            if time.monotonic() > deadline:
                rows.append({"case": case.name, "error": "not started: out of time"})
            elif gpu:
                rows.append({"case": case.name, **Report.attempt(case.name, lambda: time_case(
                    case, args, candidates, opts.repeats, ceilings, deadline))})
                free_gpu_memory()
            else:
                rows.append({"case": case.name, "candidates": [
                    {"config": c.to_dict(), "estimate_us": e, **compiled(f)}
                    for c, e, f in candidates]})
            print(line(rows[-1]) if gpu else dry_line(rows[-1]), flush=True)
            report.save()
    finally:
        workers.close()
        report.data["wall_s"] = round(time.monotonic() - start, 1)
        report.save()


def free_gpu_memory() -> None:
    """The last case's tensors back to the driver (the next case's may be larger)."""
    import torch
    torch.cuda.empty_cache()


def target(gpu: bool) -> tuple[str, int | None]:
    """The architecture and SM count to compile for: the GPU's, else an H100's."""
    if not gpu:
        return "sm_90", None
    import torch
    props = torch.cuda.get_device_properties(0)
    return f"sm_{props.major}{props.minor}", props.multi_processor_count


def dry_line(row: dict) -> str:
    failed = [c for c in row["candidates"] if "predicted_us" not in c]
    return (f"{row['case']:44} {len(row['candidates'])} candidates compiled for sm_90, "
            f"{len(failed)} failed" + "".join(
                f"\n    {c['config']}: {c.get('error', c.get('worker'))}" for c in failed))


def compile_only(cases: list[Case]) -> list[dict]:
    """Each case's default config compiled for sm_90: codegen and compile time, resources."""
    from lowering.backends.triton.codegen import generate
    from lowering.backends.triton.targets import array_strides
    rows = []
    for case in cases:
        kernel = getattr(example_module(case.example), case.example)
        args = example_module(case.example).make_inputs(Float32Normal(0), case.dims, case.dtype)
        lowered = kernel.traced(*args).for_backend("triton")
        config = kernel.config_space(*args, backend="triton").default()
        strides = array_strides(lowered, list(args))
        times = []
        for _ in range(20):
            start = time.perf_counter()
            generate(lowered, config, strides)
            times.append((time.perf_counter() - start) * 1e3)
        for r in kernel.compile(*args, config=config, arch="sm_90"):
            rows.append({"case": case.name, "config": config.to_dict(),
                         "codegen_ms": round(statistics.median(times), 3),
                         "compile_s": round(r.compile_seconds, 3), "registers": r.registers,
                         "spill_bytes": r.spill_bytes, "shared_bytes": r.shared_bytes,
                         "problem": r.problem})
            print(f"{case.name:44} {str(config.block_sizes):16} w{config.num_warps} "
                  f"s{config.num_stages}: codegen {rows[-1]['codegen_ms']:.2f} ms, compile "
                  f"{r.compile_seconds:.1f} s, {r.registers} regs, {r.spill_bytes} spilled, "
                  f"{r.shared_bytes} B shared" + (f" ({r.problem})" if r.problem else ""))
    return rows


def has_gpu() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", choices=[*PARTS, "compile-only"])
    ap.add_argument("--quick", action="store_true", help="one shape per kind")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--ceilings", help="gpu_ceilings.py's report, for fractions of the ceilings")
    ap.add_argument("--timeout", type=float, help="start no case after this many seconds")
    ap.add_argument("--out", help=out_help("gpu_PART.json"))
    opts = ap.parse_args()
    out = out_path(opts.out, f"gpu_{opts.part}.json")
    report = Report(f"gpu_kernels {opts.part}", out)
    if opts.part == "compile-only":
        report.data["results"] = compile_only([c for part in PARTS.values()
                                               for c in part(opts.quick)])
        report.save()
    else:
        gpu = has_gpu()
        report.data["mode"] = "timed on the GPU" if gpu else "no GPU: ranked and compiled only"
        run_part(PARTS[opts.part](opts.quick), opts, report, gpu)
    print(f"wrote {out}")
    failed = [r["case"] for r in report.data["results"] if "error" in r]
    if failed:
        print(f"{len(failed)} cases failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
