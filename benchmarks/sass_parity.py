"""tiledsl's generated kernels against hand-written Triton kernels, instruction by instruction.

    python benchmarks/sass_parity.py [--arch sm_90|sm_80] [--only SUBSTRING] [--out FILE]
    # default output: a scratch directory (benchmarks/outputs.py)

Each case compiles tiledsl's example (examples/*.py) and the reference kernel of the same
computation (benchmarks/reference_kernels/) with the same config (block sizes, warps, stages,
TMA, persistence) for one architecture, without a GPU, disassembles both cubins with the
cuobjdump bundled in Triton, and reports registers, spills, shared memory, SASS instructions in
all and per main-loop iteration, and what the loop issues: HGMMA/HMMA and the waits on them
(WARPGROUP.DEPBAR: one per HGMMA when ptxas serializes the pipeline), TMA loads (UTMALDG),
asynchronous copies (LDGSTS), the width of global loads, compares and selects (the masks),
FSETP (denormal fix-ups) and MUFU. The main loop is the innermost loop with the most MMA
instructions, the first of equals (for causal attention, the key tiles before the diagonal);
kernels without a loop (whole-row softmax and norms) are compared on the whole kernel. Where
tiledsl's loop is over 5% longer, the opcodes that make the difference are printed. Compiles are
cached (TILEDSL_CACHE_DIR, TRITON_CACHE_DIR), so a second run only disassembles.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

import tiledsl as td

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from support import example  # noqa: E402
from outputs import out_help, out_path  # noqa: E402  (benchmarks/outputs.py)

from lowering.backends.triton.compile import ARCHS, ptxas_notes, resource_usage  # noqa: E402
from reference_kernels import Launch, aot_signature, load  # noqa: E402

BF16 = ml_dtypes.bfloat16

# ---- SASS --------------------------------------------------------------------------------------
# One instruction of `cuobjdump --dump-sass`: /*0af0*/  @!P0 LDG.E.128 R4, desc[UR4][R2.64] ;
SASS_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Za-z0-9_.]*)([^;]*);")
MMA = ("HGMMA", "HMMA")
COUNTED = ("HGMMA", "HMMA", "UTMALDG", "UTMASTG", "LDGSTS", "LDG", "STG", "MUFU", "SEL", "ISETP",
           "FSETP", "BAR")


@dataclass(frozen=True)
class Instr:
    address: int
    opcode: str  # with its modifiers: LDG.E.128
    predicated: bool
    operands: str

    @property
    def base(self) -> str:
        return self.opcode.split(".")[0]

    @property
    def target(self) -> int | None:
        """Where a branch goes (cuobjdump prints absolute addresses)."""
        if self.base != "BRA":
            return None
        hexes = re.findall(r"0x([0-9a-f]+)", self.operands)
        return int(hexes[-1], 16) if hexes else None


@dataclass(frozen=True)
class Loop:
    head: int  # address of the first instruction of the body
    latch: int  # address of the backward branch

    def body(self, instrs: list[Instr]) -> list[Instr]:
        return [i for i in instrs if self.head <= i.address <= self.latch]

    def contains(self, other: Loop) -> bool:
        return self != other and self.head <= other.head and other.latch <= self.latch


def parse_sass(text: str) -> list[Instr]:
    """The instructions of the first function of a `cuobjdump --dump-sass` listing, NOPs left
    out (padding; ptxas puts none inside Triton's loops)."""
    out: list[Instr] = []
    for line in text.split("Function :", 2)[1 if "Function :" in text else 0].splitlines():
        m = SASS_LINE.search(line)
        if m and m.group(3) != "NOP":
            out.append(Instr(int(m.group(1), 16), m.group(3), m.group(2) is not None,
                             m.group(4).strip()))
    return out


def find_loops(instrs: list[Instr]) -> list[Loop]:
    """Loops: a backward branch and its target. Not loops: the trap `BRA self` after EXIT, and
    the jumps back from the out-of-line mbarrier-wait retry blocks that ptxas puts after EXIT
    (their range covers an EXIT). Loops sharing a head are one loop."""
    exits = [i.address for i in instrs if i.base == "EXIT"]
    latches: dict[int, int] = {}
    for i in instrs:
        t = i.target
        if t is None or t > i.address or (t == i.address and not i.predicated):
            continue
        if any(t <= e <= i.address for e in exits):
            continue
        latches[t] = max(latches.get(t, i.address), i.address)
    return sorted((Loop(h, l) for h, l in latches.items()), key=lambda lp: lp.head)


def main_loop(instrs: list[Instr], loops: list[Loop]) -> Loop | None:
    """Of the innermost loops holding MMA instructions, the first with the most; without MMAs,
    the longest innermost loop; None without loops."""
    mma = {lp: sum(i.base in MMA for i in lp.body(instrs)) for lp in loops}
    with_mma = [lp for lp in loops if mma[lp]]
    pool = with_mma or loops
    inner = [lp for lp in pool if not any(lp.contains(o) for o in pool)]
    if not inner:
        return None
    if with_mma:
        return max(inner, key=lambda lp: mma[lp])  # the first of equals
    return max(inner, key=lambda lp: len(lp.body(instrs)))


def load_bits(opcode: str) -> int:
    """Bits one thread moves with a global load or store opcode (LDG.E.128 -> 128)."""
    mods = opcode.split(".")[1:]
    for bits, names in ((128, ("128",)), (64, ("64",)), (16, ("U16", "S16")), (8, ("U8", "S8"))):
        if any(m in names for m in mods):
            return bits
    return 32


def counts(instrs: list[Instr]) -> dict[str, Any]:
    """Instructions, the COUNTED opcodes (SEL includes FSEL; MUFU.EX2 apart too), and the
    widths of global loads (LDG and LDGSTS) and stores, as {bits: count}."""
    bases = Counter("SEL" if i.base == "FSEL" else i.base for i in instrs)
    out: dict[str, Any] = {"instructions": len(instrs)}
    out.update({name: bases[name] for name in COUNTED})
    out["MUFU.EX2"] = sum(i.opcode == "MUFU.EX2" for i in instrs)
    # A wait per HGMMA means ptxas serialized the wgmma pipeline (its info C7515).
    out["wgmma_waits"] = sum(i.opcode.startswith("WARPGROUP.DEPBAR") for i in instrs)
    out["load_bits"] = dict(sorted(Counter(
        load_bits(i.opcode) for i in instrs if i.base in ("LDG", "LDGSTS")).items()))
    out["store_bits"] = dict(sorted(Counter(
        load_bits(i.opcode) for i in instrs if i.base == "STG").items()))
    out["opcodes"] = dict(Counter(i.opcode for i in instrs).most_common())
    return out


def opcode_difference(a: dict[str, Any], b: dict[str, Any], top: int = 8) -> list[tuple[str, int]]:
    """The opcodes whose counts differ most between two `counts` (a's minus b's)."""
    names = set(a["opcodes"]) | set(b["opcodes"])
    delta = {n: a["opcodes"].get(n, 0) - b["opcodes"].get(n, 0) for n in names}
    return sorted(((n, d) for n, d in delta.items() if d), key=lambda x: (-abs(x[1]), x[0]))[:top]


def sass_stats(text: str) -> dict[str, Any]:
    """Counts over the whole kernel and over its main loop, and every loop's size and MMAs."""
    instrs = parse_sass(text)
    loops = find_loops(instrs)
    main = main_loop(instrs, loops)
    return {"kernel": counts(instrs),
            "main_loop": None if main is None else
            {"head": hex(main.head), **counts(main.body(instrs))},
            "loops": [{"head": hex(lp.head), "instructions": len(lp.body(instrs)),
                       "mma": sum(i.base in MMA for i in lp.body(instrs))} for lp in loops]}


def disassemble(cubin: bytes) -> str:
    """`cuobjdump --dump-sass` of a cubin, with the cuobjdump bundled in Triton's package."""
    import triton
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([str(tool), "--dump-sass", f.name], capture_output=True,
                              text=True, timeout=120, check=True).stdout


# ---- the cases ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    name: str
    example: str  # examples/<example>.py, whose kernel has the same name
    dims: dict[str, int]
    dtype: Any
    config: td.Config  # tiledsl's; the reference reads the same block sizes and knobs
    reference: str  # reference_kernels/<reference>.py
    hopper_only: bool = False  # TMA: skipped before sm_90


def gemm_cases() -> list[Case]:
    """The matmul tutorials' Hopper configs, plain, with TMA and persistent with TMA."""
    out = []
    for (bm, bn, bk), warps, stages in (((128, 256, 64), 8, 3), ((128, 128, 64), 4, 4)):
        for label, knobs in (("", {"tma": False, "persistent": False}),
                             (" tma", {"tma": True, "persistent": False}),
                             (" tma persistent", {"tma": True, "persistent": True})):
            config = td.Config((bm, bn, bk), warps, stages, group_m=8, **knobs)
            tile = f"{bm}x{bn}x{bk} w{warps} s{stages}{label}"
            for dtype, dname in ((np.float16, "fp16"), (BF16, "bf16")):
                out.append(Case(f"gemm {dname} {tile}", "matmul", {"m": 4096, "n": 4096,
                                "k": 4096}, dtype, config, "gemm", knobs["tma"]))
            if label != " tma persistent":
                out.append(Case(f"gemm+bias+gelu fp16 {tile}", "gemm_bias_gelu",
                                {"m": 4096, "n": 4096, "k": 4096}, np.float16, config, "gemm",
                                knobs["tma"]))
    return out


def row_cases() -> list[Case]:
    """One row of 8192 fp16 per program."""
    return [Case(f"{name} fp16 8192x8192 w{warps}", name, {"m": 8192, "n": 8192}, np.float16,
                 td.Config((1,), warps, 1), name)
            for name in ("softmax", "layer_norm", "rms_norm") for warps in (4, 8)]


def attention_cases() -> list[Case]:
    """The fused-attention tutorial's 128x64 tiles at 4 and 8 warps, d = 64 and 128, K and V
    through pointers and through TMA."""
    out = []
    for d in (64, 128):
        for warps in (4, 8):
            for tma in (False, True):
                config = td.Config((128, 64), warps, 3, group_m=1, tma=tma)
                out.append(Case(f"attention fp16 d{d} 128x64 w{warps} s3{' tma' * tma}",
                                "attention", {"batch": 4, "seq": 4096, "d": d}, np.float16,
                                config, "attention", tma))
    return out


def cases() -> list[Case]:
    return gemm_cases() + row_cases() + attention_cases()


@cache
def inputs(name: str, dims: tuple[tuple[str, int], ...], dtype: Any) -> tuple:
    """The example's make_inputs, once per shape and dtype (compiles specialize on them)."""
    return example(name).make_inputs(np.random.default_rng(0), dict(dims), dtype)


def meta_tensors(args: tuple) -> list[Any]:
    """torch tensors on the meta device shaped, typed and strided like the NumPy arguments
    (no memory: the reference is only compiled); scalars as they are."""
    import torch
    dtypes = {np.dtype(np.float16): torch.float16, np.dtype(BF16): torch.bfloat16,
              np.dtype(np.float32): torch.float32}
    return [torch.empty(a.shape, dtype=dtypes[a.dtype], device="meta")
            if isinstance(a, np.ndarray) else a for a in args]


def reference_launch(case: Case, args: list[Any], interpret: bool = False) -> Launch:
    """The reference kernel bound to `args` (torch tensors) under the case's config."""
    mod = load(case.reference, interpret=interpret)
    c = case.config
    if case.reference == "gemm":
        a, b, *bias = args
        return mod.bind(a, b, c, *bias, tma=c.get("tma", False),
                        persistent=c.get("persistent", False))
    if case.reference == "attention":
        return mod.bind(*args, c, tma=c.get("tma", False))
    return mod.bind(*args, c)


# ---- compiling both sides ----------------------------------------------------------------------
def tiledsl_side(case: Case, arch: str) -> dict[str, Any]:
    args = inputs(case.example, tuple(case.dims.items()), case.dtype)
    kernel = getattr(example(case.example), case.example)
    reports = kernel.compile(*args, config=case.config, arch=arch)
    r = reports[0]  # these examples generate one kernel each
    return {"kernels": len(reports), "registers": r.registers, "spill_bytes": r.spill_bytes,
            "shared_bytes": r.shared_bytes, "ptxas_warnings": list(r.ptxas_notes),
            **sass_stats(disassemble(r.cubin))}


def reference_side(case: Case, arch: str) -> dict[str, Any]:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    args = inputs(case.example, tuple(case.dims.items()), case.dtype)
    launch = reference_launch(case, meta_tensors(args))
    sig, consts, attrs = aot_signature(launch)
    options = {"num_warps": launch.num_warps, "num_stages": launch.num_stages,
               "enable_fp_fusion": True}
    ck = triton.compile(ASTSource(launch.kernel, sig, constexprs=consts, attrs=attrs),
                        target=GPUTarget("cuda", ARCHS[arch], 32), options=options)
    cubin = ck.asm["cubin"]
    usage = resource_usage(cubin)
    return {"kernel_name": ck.metadata.name, "registers": usage["registers"],
            "spill_bytes": usage["spill_bytes"], "shared_bytes": ck.metadata.shared,
            "ptxas_warnings": list(ptxas_notes(ck.asm["ptx"])),
            **sass_stats(disassemble(cubin))}


def compare(case: Case, arch: str) -> dict[str, Any]:
    """One case's row: both sides, or the error of the side that failed."""
    row: dict[str, Any] = {"case": case.name, "example": case.example,
                           "reference": f"reference_kernels/{case.reference}.py",
                           "config": case.config.to_dict(), "dims": case.dims}
    for side, fn in (("tiledsl", tiledsl_side), ("reference", reference_side)):
        start = time.perf_counter()
        try:
            row[side] = fn(case, arch)
        except Exception as e:  # noqa: BLE001 - recorded; the other side and cases still run
            row[side] = {"error": f"{type(e).__name__}: {str(e)[:2000]}"}
        row[side]["seconds"] = round(time.perf_counter() - start, 2)
    row["loop_ratio"] = loop_ratio(row["tiledsl"], row["reference"])
    if case.reference == "attention":
        row["program_ratio"] = program_ratio(case, row["tiledsl"], row["reference"])
    return row


def causal_program(case: Case, side: dict[str, Any]) -> float | None:
    """Causal attention's SASS instructions per program in its two key loops, averaged over
    the query tiles: query tile i runs i * BM / BN trips of the loop before the diagonal and
    BM / BN on it (seq a multiple of BM). None unless the kernel has the two loops."""
    mma = [lp["instructions"] for lp in side.get("loops", []) if lp["mma"]]
    if len(mma) != 2:
        return None
    bm, bn = case.config.block_sizes
    tiles = case.dims["seq"] // bm
    before = sum(i * bm // bn for i in range(tiles)) / tiles
    return before * mma[0] + -(-bm // bn) * mma[1]


def program_ratio(case: Case, td_side: dict[str, Any], ref_side: dict[str, Any]
                  ) -> float | None:
    """tiledsl's `causal_program` over the reference's: both key loops, as each program runs
    them (the diagonal loop's form differs: the reference adds a -1e6 mask, tiledsl selects
    -inf)."""
    if "error" in td_side or "error" in ref_side:
        return None
    a, b = causal_program(case, td_side), causal_program(case, ref_side)
    return None if a is None or b is None else round(a / b, 3)


def body(side: dict[str, Any]) -> dict[str, Any] | None:
    """What a side's per-iteration columns count: its main loop, else the whole kernel."""
    if "error" in side:
        return None
    return side["main_loop"] or side["kernel"]


def loop_ratio(td_side: dict[str, Any], ref_side: dict[str, Any]) -> float | None:
    """tiledsl's instructions per main-loop iteration over the reference's (whole kernels
    where neither has a loop)."""
    a, b = body(td_side), body(ref_side)
    if a is None or b is None or bool(td_side["main_loop"]) != bool(ref_side["main_loop"]):
        return None
    return round(a["instructions"] / b["instructions"], 3)


# ---- report ------------------------------------------------------------------------------------
COLUMNS = (("regs", 7), ("spill", 7), ("smem KB", 9), ("total", 11), ("loop", 9), ("ratio", 5),
           ("mma", 7), ("wait", 5), ("tmald", 5), ("ldgsts", 6), ("ld bits", 9), ("sel", 7),
           ("isetp", 7), ("fsetp", 7), ("mufu", 7))


def cells(side: dict[str, Any]) -> dict[str, str]:
    """One side's table cells; per-iteration columns count the main loop, else the kernel."""
    if "error" in side:
        return {name: "err" for name, _ in COLUMNS}
    b = body(side)
    assert b is not None
    return {"regs": str(side["registers"]), "spill": str(side["spill_bytes"]),
            "smem KB": f"{side['shared_bytes'] / 1024:.0f}",
            "total": str(side["kernel"]["instructions"]),
            "loop": str(side["main_loop"]["instructions"]) if side["main_loop"] else "-",
            "mma": str(b["HGMMA"] + b["HMMA"]), "wait": str(b["wgmma_waits"]),
            "tmald": str(b["UTMALDG"]),
            "ldgsts": str(b["LDGSTS"]), "ld bits": "+".join(map(str, b["load_bits"])) or "-",
            "sel": str(b["SEL"]), "isetp": str(b["ISETP"]), "fsetp": str(b["FSETP"]),
            "mufu": str(b["MUFU"])}


def print_table(rows: list[dict[str, Any]], arch: str) -> None:
    print(f"SASS for {arch}: each cell is tiledsl/reference; mma..mufu count one main-loop "
          "iteration (the whole kernel where there is no loop); ratio = tiledsl/reference loop")
    print(f"{'case':46}" + "".join(f"{name:>{w + 1}}" for name, w in COLUMNS))
    for row in rows:
        a, b = cells(row["tiledsl"]), cells(row["reference"])
        line = f"{row['case']:46}"
        for name, w in COLUMNS:
            if name == "ratio":
                r = row["loop_ratio"]
                line += f"{'-' if r is None else f'{r:.2f}':>{w + 1}}"
            else:
                line += f"{a[name] + '/' + b[name]:>{w + 1}}"
        print(line)
    print_differences(rows)
    for row in rows:
        for side in ("tiledsl", "reference"):
            for note in row[side].get("ptxas_warnings", []):
                print(f"{row['case']}: {side}: ptxas: {note}")
            if "error" in row[side]:
                print(f"{row['case']}: {side} failed: {row[side]['error'].splitlines()[0]}")


def print_differences(rows: list[dict[str, Any]], above: float = 1.05) -> None:
    """For each case where tiledsl's loop is over `above` times the reference's: the opcodes
    that make the difference, tiledsl's count minus the reference's per iteration."""
    worse = [r for r in rows if r["loop_ratio"] is not None and r["loop_ratio"] > above]
    if worse:
        print(f"\nWhere tiledsl issues more than {above:.2f}x the reference's instructions "
              "(opcode: tiledsl minus reference, per iteration):")
    for row in worse:
        a, b = body(row["tiledsl"]), body(row["reference"])
        assert a is not None and b is not None
        diff = ", ".join(f"{n} {d:+d}" for n, d in opcode_difference(a, b))
        print(f"  {row['case']}: {diff}")


def versions() -> dict[str, str]:
    import torch
    import triton
    return {"python": sys.version.split()[0], "triton": triton.__version__,
            "torch": torch.__version__, "numpy": np.__version__, "tiledsl": td.__version__}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="sm_90", choices=("sm_90", "sm_80"))
    parser.add_argument("--only", default="", help="only cases whose name contains this")
    parser.add_argument("--out", help=out_help("sass_parity_ARCH.json"))
    opts = parser.parse_args()
    out = out_path(opts.out, f"sass_parity_{opts.arch.replace('_', '')}.json")
    hopper = ARCHS[opts.arch] >= 90
    chosen = [c for c in cases() if opts.only in c.name and (hopper or not c.hopper_only)]
    start = time.perf_counter()
    rows = []
    for case in chosen:
        rows.append(compare(case, opts.arch))
        print(f"  {case.name}: {row_seconds(rows[-1]):.1f} s", flush=True)
    seconds = time.perf_counter() - start
    print_table(rows, opts.arch)
    programs = [r for r in rows if r.get("program_ratio") is not None]
    if programs:
        print("\nCausal attention, both key loops per program (averaged over the query tiles), "
              "tiledsl/reference: " + ", ".join(f"{r['case'].removeprefix('attention fp16 ')} "
                                                f"{r['program_ratio']:.3f}" for r in programs))
    print(f"{len(rows)} cases in {seconds:.0f} s")
    report = {"benchmark": "sass_parity", "arch": opts.arch, "versions": versions(),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "seconds": round(seconds, 1), "results": rows}
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {out}")


def row_seconds(row: dict[str, Any]) -> float:
    return row["tiledsl"]["seconds"] + row["reference"]["seconds"]


if __name__ == "__main__":
    main()
