"""Ahead-of-time compilation of generated kernels to PTX and cubin, without a GPU.

`triton.compile(ASTSource(...), target=GPUTarget("cuda", cc, 32))` runs on any machine. The
resource usage (registers, spills, shared memory) comes from the cubin through the `cuobjdump`
shipped inside Triton's package. Results are cached on disk by content hash: the generated
source, the signature, the options, the target and the Triton version.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, fields
from functools import cached_property
from pathlib import Path
from typing import Any

from lowering.backends.triton.codegen import GeneratedKernel, Module
from lowering.backends.triton.loader import load
from lowering.backends.triton.space import SHARED_BYTES
from tiledsl.runtime.cache_files import digest, ignored, read_entry, seal, unseal, write_entry
from tiledsl.errors import BackendError
from tiledsl.runtime.paths import cache_dir
from tiledsl.ir.types import TensorType, TileType

ARCHS = {"sm_80": 80, "sm_86": 86, "sm_89": 89, "sm_90": 90}
POINTER = {"f16": "*fp16", "bf16": "*bf16", "f32": "*fp32", "f64": "*fp64", "i8": "*i8",
           "i16": "*i16", "i32": "*i32", "i64": "*i64", "u8": "*u8", "u16": "*u16",
           "u32": "*u32", "u64": "*u64", "i1": "*i1", "f8e4m3": "*fp8e4nv", "f8e5m2": "*fp8e5",
           "f8e8m0": "*u8"}


@dataclass(frozen=True)
class Compiled:
    """One kernel compiled for one architecture, with what the cubin says it uses."""

    kernel: str  # the entry point's name in the cubin
    arch: str
    num_warps: int
    num_stages: int
    shared_bytes: int  # dynamic shared memory to request at launch
    registers: int
    spill_bytes: int  # local memory per thread (spills and stack)
    static_shared_bytes: int
    compile_seconds: float
    triton_version: str
    ptx_path: str
    cubin_path: str
    # For launching the cubin without Triton (an AOT package): the `.param` entries of the PTX
    # `.entry`, which include hidden trailing pointers the Python signature does not show, and the
    # scratch memory Triton's own launcher would allocate for them.
    param_count: int
    global_scratch_bytes: int
    profile_scratch_bytes: int

    @property
    def ptx(self) -> str:
        return Path(self.ptx_path).read_text()

    @property
    def cubin(self) -> bytes:
        return Path(self.cubin_path).read_bytes()

    @cached_property
    def ptxas_notes(self) -> tuple[str, ...]:
        """ptxas's "Potential Performance Loss" notes on this kernel (`ptxas_notes`), found
        when first asked for: assembling again costs 0.09-0.47 s (attention, GEMM and
        GEMM+GELU on sm_90, whose cold compiles took 0.7-1.8 s), which the tuner's compiles
        do not pay."""
        return ptxas_notes(self.ptx)

    @property
    def problem(self) -> str | None:
        """Why this config should not be used (None if it is fine)."""
        if self.spill_bytes > 0:
            return f"spills {self.spill_bytes} bytes of local memory per thread"
        if self.ptxas_notes:
            return "ptxas: " + "; ".join(self.ptxas_notes)
        limit = SHARED_BYTES.get(self.arch, SHARED_BYTES["sm_80"])
        if self.shared_bytes + self.static_shared_bytes > limit:
            return f"needs {self.shared_bytes} bytes of shared memory, {self.arch} has {limit}"
        return None


def _triton() -> Any:
    try:
        import triton
    except ImportError:
        raise BackendError("compiling to PTX needs triton: pip install triton") from None
    return triton


def signature(k: GeneratedKernel) -> tuple[dict[str, str], dict[str, int], dict[tuple, list]]:
    """ASTSource's signature, constexprs and attrs: pointers are 16-byte aligned (so Triton
    vectorizes and pipelines loads); block sizes are constexpr."""
    sig: dict[str, str] = {}
    consts: dict[str, int] = {}
    attrs: dict[tuple, list] = {}
    for i, p in enumerate(k.params):
        if p.kind == "block":
            sig[p.name] = "constexpr"
            assert p.value is not None
            consts[p.name] = p.value
        elif p.kind == "desc":
            assert p.source is not None and isinstance(p.source.type, TensorType)
            box = ", ".join(map(str, p.box))
            sig[p.name] = f"tensordesc<{POINTER[p.source.type.dtype.short][1:]}[{box}]>"
        elif p.kind in ("tensor", "scalar_ptr"):
            assert p.source is not None
            t = p.source.type
            dtype = t.dtype if isinstance(t, (TensorType, TileType)) else None
            assert dtype is not None
            sig[p.name] = POINTER[dtype.short]
            attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            sig[p.name] = p.dtype
    return sig, consts, attrs


def resource_usage(cubin: bytes) -> dict[str, int]:
    """REG / LOCAL / SHARED of the cubin's kernel, read with Triton's bundled cuobjdump."""
    tool = Path(_triton().__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
    try:
        out = subprocess.run([str(tool), "--dump-resource-usage", f.name], capture_output=True,
                             text=True, timeout=60).stdout
    finally:
        os.unlink(f.name)
    m = re.search(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)", out)
    if m is None:
        raise BackendError(f"cuobjdump printed no resource usage:\n{out}")
    reg, stack, shared, local = (int(x) for x in m.groups())
    return {"registers": reg, "spill_bytes": local + stack, "static_shared_bytes": shared}


def ptxas_notes(ptx: str) -> tuple[str, ...]:
    """ptxas's "Potential Performance Loss" notes on a PTX module that uses wgmma, each with its
    reason (C7515: "wgmma.mma_async instructions are serialized due to ..."), from Triton's own
    ptxas run again with `-v`: Triton runs it without, and never shows them. Under triton 3.9
    causal attention with group_m=1 had its wgmma serialized this way (loops.py
    `opaque_trips`).
    The notes concern the wgmma pipeline, so a module without wgmma is not assembled again.
    They are advice: where that ptxas cannot be found or run, there are none."""
    if "wgmma" not in ptx:
        return ()
    found = re.search(r"^\.target\s+(sm_(\d+)\w*)", ptx, re.M)
    target, cc = (found.group(1), int(found.group(2))) if found else ("sm_90a", 90)
    try:
        from triton.backends.nvidia.compiler import get_ptxas
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "k.ptx"
            src.write_text(ptx)
            cmd = [get_ptxas(cc).path, "-v", f"-arch={target}", str(src), "-o", f"{tmp}/k.o"]
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (ImportError, OSError, RuntimeError, subprocess.SubprocessError):
        return ()
    lines = (out.stdout + out.stderr).splitlines()
    return tuple(sorted({re.sub(r"^.*?info\s*:\s*", "", line).split(" in the function")[0]
                         for line in lines if "Performance Loss" in line}))


def entry_param_count(ptx: str, name: str) -> int:
    """How many `.param` entries the PTX `.entry` of kernel `name` declares."""
    m = re.search(rf"\.entry\s+{re.escape(name)}\s*\((.*?)\)", ptx, re.S)
    if m is None:
        raise BackendError(f"the PTX has no .entry {name} (internal error)")
    return len(re.findall(r"\.param\b", m.group(1)))


def _cached(folder: Path, name: str) -> Compiled | None:
    """The compile of kernel `name` cached in `folder`; None (a miss) if there is none, if it was
    written by an older tiledsl whose Compiled had other fields, or if its PTX or cubin is not
    the one compiled (checked against the digests sealed into compiled.json, with a warning)."""
    entry = unseal(folder / "compiled.json")
    if not isinstance(entry, dict) or not isinstance(entry.get("compiled"), dict):
        return None
    data = entry["compiled"]
    if set(data) != {f.name for f in fields(Compiled)}:
        return None
    for suffix in ("ptx", "cubin"):
        path = folder / f"{name}.{suffix}"
        content = read_entry(path)
        if content is None or digest(content) != entry.get(suffix):
            if content is not None:
                ignored(path, "its content does not match the digest compiled.json holds")
            return None
        data[f"{suffix}_path"] = str(path)  # here, wherever the cache directory was then
    return Compiled(**data)


def _not_interpreted_stdlib() -> None:
    """Triton's own `@jit` library (tl.sum, tl.zeros_like, ...) is interpreter code for good
    when TRITON_INTERPRET=1 was set as triton.language was imported, and a compile that calls
    it fails: a BackendError that names the variable, not Triton's crash inside."""
    from triton.language import standard
    from triton.runtime.jit import JITFunction
    if not isinstance(standard.sum, JITFunction):
        raise BackendError(
            "Triton was imported with TRITON_INTERPRET=1 set, so its library functions (tl.sum, "
            "tl.zeros_like, ...) are interpreter code, and no kernel that calls them can "
            "compile for a GPU in this process",
            hint="unset TRITON_INTERPRET: tiledsl's backend 'triton-interpret' runs Triton's "
                 "interpreter without it, and compiles still work in the same process")


def compile_kernel(module: Module, k: GeneratedKernel, arch: str) -> Compiled:
    """PTX and cubin of kernel `k` of `module` for `arch` (sm_80, sm_90, ...), from the cache."""
    if arch not in ARCHS:
        raise BackendError(f"unknown architecture {arch!r}; known: {sorted(ARCHS)}")
    sig, consts, attrs = signature(k)
    if ARCHS[arch] < 89 and ("tl.float8e4nv" in module.source or
                             any("fp8e4nv" in str(t) for t in sig.values())):
        raise BackendError(f"{k.name} uses float8_e4m3fn, which GPUs before sm_89 (Ada, Hopper) "
                           f"do not have (Triton's fp8e4nv): it cannot compile for {arch}",
                           hint="compile for sm_89 or sm_90, or use td.float8_e5m2")
    triton = _triton()
    options = {"num_warps": k.num_warps, "num_stages": k.num_stages, "enable_fp_fusion": True}
    key_text = json.dumps([module.source, k.name, sig, consts, sorted(map(str, attrs)), options,
                           arch, triton.__version__], sort_keys=True)
    key = hashlib.sha256(key_text.encode()).hexdigest()[:32]
    folder = cache_dir() / "compiled" / key
    hit = _cached(folder, k.name)
    if hit is not None:
        return hit
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = getattr(load(module.source, interpret=False), k.name)
    start = time.perf_counter()
    try:
        ck = triton.compile(ASTSource(fn, sig, constexprs=consts, attrs=attrs),
                            target=GPUTarget("cuda", ARCHS[arch], 32), options=options)
    except Exception as e:  # Triton's compiler errors carry its own source excerpt
        _not_interpreted_stdlib()
        raise BackendError(f"Triton failed to compile {k.name} for {arch}: {e}") from e
    seconds = time.perf_counter() - start
    ptx, cubin = ck.asm["ptx"].encode(), ck.asm["cubin"]
    write_entry(folder / f"{k.name}.ptx", ptx)
    write_entry(folder / f"{k.name}.cubin", cubin)
    usage = resource_usage(ck.asm["cubin"])
    md = ck.metadata
    compiled = Compiled(kernel=md.name, arch=arch, num_warps=md.num_warps,
                        num_stages=k.num_stages, shared_bytes=md.shared,
                        compile_seconds=seconds, triton_version=triton.__version__,
                        ptx_path=str(folder / f"{k.name}.ptx"),
                        cubin_path=str(folder / f"{k.name}.cubin"),
                        param_count=entry_param_count(ck.asm["ptx"], md.name),
                        # triton 3.6 and 3.9 both name them so; older ones had no scratch
                        global_scratch_bytes=int(getattr(md, "global_scratch_size", 0) or 0),
                        profile_scratch_bytes=int(getattr(md, "profile_scratch_size", 0) or 0),
                        **usage)
    write_entry(folder / "compiled.json", seal({"compiled": asdict(compiled), "ptx": digest(ptx),
                                                "cubin": digest(cubin)}))
    return compiled


def compile_module(module: Module, arch: str) -> list[Compiled]:
    return [compile_kernel(module, k, arch) for k in module.kernels]
