"""Ahead-of-time kernel packages: `export` writes cubins and a manifest for sm_80 and sm_90 on a
machine without a GPU; `tiledsl.interop.aot.load` checks arguments and launches with CuPy alone.

Without a GPU the launch plan is checked by executing it: `run_plan_on_cpu` follows the
manifest exactly as tiledsl/interop/aot.py does, but with torch CPU tensors and the package's own
kernel_triton.py under Triton's interpreter in place of CuPy and the cubins.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tiledsl as td
from support import ROOT, example, fresh, kernel_of, scaled_rows, sized_rows
from tiledsl.interop import package_check
from tiledsl.interop.aot import FORMAT_VERSION, LoadedKernel, load, validate_manifest
from tiledsl.interop.package_check import package_digest
from tiledsl.runtime.returns import pack
from tiledsl.cli.commands import main
from tiledsl.interop.export import TMA_NOTE, export

pytest.importorskip("triton")

ARCHS = ["sm_80", "sm_90"]
INTERPRETER_SMS = 3  # persistent kernels then walk several tiles per program


@td.tile_kernel
def scale_(x, k):
    """Scale x in place by the integer k and return it (an output that is an argument)."""
    m, n = x.shape
    for tm, tn in td.tile(m, n):
        x[tm, tn] = x[tm, tn] * k
    return x


@td.tile_kernel
def masked_max(x, y):
    """The larger of x and y where y > 0, else -inf: a buffer td.full fills with -inf."""
    (n,) = x.shape
    out = td.full((n,), -float("inf"), dtype=td.float32)
    for t in td.tile(n):
        out[t] = td.where(y[t] > 0, td.maximum(x[t], y[t]), out[t])
    return out


@td.tile_kernel
def accumulate(acc, y):
    """acc += y, returning nothing (the kernel's effect is its write into an argument)."""
    (n,) = acc.shape
    for t in td.tile(n):
        acc[t] = acc[t] + y[t]


def scale_inputs() -> tuple:
    base = np.random.default_rng(5).standard_normal((30, 21)).astype(np.float32)
    return (base.T, 3)  # a transposed view: strides (1, 21) are baked into the package


CASES: dict[str, tuple[dict[str, int], type]] = {  # example: (small ragged dims, dtype)
    "matmul": ({"m": 37, "k": 48, "n": 40}, np.float16),  # rows of 16 bytes: a runtime stride
    "softmax": ({"m": 19, "n": 45}, np.float32),
    "layer_norm": ({"m": 19, "n": 45}, np.float32),  # eps: a scalar passed by value
    "axpby": ({"m": 19, "n": 37}, np.float16),  # alpha, beta: float64 scalars read from memory
}
NAMES = [*CASES, "scale_"]


def case(name: str) -> tuple[Any, tuple, Any]:
    """The kernel, example arguments and float64 reference of a test case."""
    if name == "scale_":
        args = scale_inputs()
        return scale_, args, args[0].astype(np.float64) * args[1]
    dims, dtype = CASES[name]
    mod = example(name)
    args = mod.make_inputs(np.random.default_rng(1), dims, dtype)
    return getattr(mod, name), args, mod.reference(*fresh(args))


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    """Every case exported for every arch, once for the module."""
    root = tmp_path_factory.mktemp("packages")
    out = {}
    for name in NAMES:
        kernel, args, _ = case(name)
        for arch in ARCHS:
            out[name, arch] = export(kernel, root / f"{name}_{arch}", *args, arch=arch)
    return out


# ---- the CPU stand-in for tiledsl.interop.aot's launcher -----------------------------------------------
def run_plan_on_cpu(pkg: Path, args: tuple, sms: int = INTERPRETER_SMS) -> Any:
    """Do what manifest.json says, as LoadedKernel.__call__ does: allocate the buffers, launch
    each kernel with its parameters in cubin order (the hidden null pointers dropped: the Python
    kernel has no such parameters) and the constexprs, and return the outputs as NumPy."""
    torch = pytest.importorskip("torch")
    from lowering.backends.triton.interpret import interpreted_stdlib, to_numpy, to_torch
    from lowering.backends.triton.loader import load as load_module

    manifest = json.loads((pkg / "manifest.json").read_text())
    module = load_module((pkg / "kernel_triton.py").read_text(), interpret=True)
    values = [to_torch(a) if isinstance(a, np.ndarray) else a for a in args]
    named = {p["name"]: v for p, v in zip(manifest["arguments"], values)}
    buffers = {b["name"]: _allocate(torch, b, named) for b in manifest["buffers"]}
    with interpreted_stdlib():
        for launch in manifest["launches"]:
            params = launch["params"]
            hidden = [p["kind"] for p in params].count("null_pointer")
            assert all(p["kind"] == "null_pointer" for p in params[len(params) - hidden:])
            visible = params[:len(params) - hidden]
            jit = getattr(module, launch["kernel"])
            assert jit.arg_names == [p["name"] for p in visible] + list(launch["constexprs"])
            programs = launch["grid"]["programs"]
            grid = min(programs, sms) if launch["grid"]["persistent"] else programs
            call = [_value(p, values, buffers, sms) for p in visible]
            jit[(grid,)](*call, **launch["constexprs"])
    outs = tuple(to_numpy(values[o["index"]] if "arg" in o else buffers[o["buffer"]])
                 for o in manifest["outputs"])
    return pack(outs, manifest["returns"])


def _torch_dtype(torch: Any, name: str) -> Any:
    return torch.bool if name == "bool" else getattr(torch, name)


def _allocate(torch: Any, b: dict[str, Any], named: dict[str, Any]) -> Any:
    dtype = _torch_dtype(torch, b["dtype"])
    if b["init"] == "empty":  # garbage, so a plan that relies on zeros fails
        value = float("nan") if dtype.is_floating_point else 77
        return torch.full(tuple(b["shape"]), value, dtype=dtype)
    value = named[b["arg"]] if b["init"] == "arg" else b["value"]
    return torch.full(tuple(b["shape"]), float(value) if isinstance(value, str) else value,
                      dtype=dtype)


def _value(p: dict[str, Any], values: list[Any], buffers: dict[str, Any], sms: int) -> Any:
    kind = p["kind"]
    if kind == "arg":
        return values[p["index"]]
    if kind == "buffer":
        return buffers[p["buffer"]]
    if kind == "num_programs":
        return min(p["programs"], sms)
    if kind == "stride":
        return p["value"]
    assert kind == "scalar", kind
    cast = {"float32": float, "int32": int, "int64": int, "bool": bool}[p["dtype"]]
    return cast(values[p["index"]])


# ---- the package -------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", NAMES)
def test_manifest_matches_schema_and_cubin(packages: dict, name: str, arch: str) -> None:
    pkg = packages[name, arch]
    manifest = json.loads((pkg / "manifest.json").read_text())
    validate_manifest(manifest)
    assert manifest["kernel"] == name and manifest["arch"] == arch
    assert manifest["triton_version"] and manifest["config_source"] == "default"
    assert sorted(p.name for p in pkg.iterdir()) == sorted([*manifest["files"], "manifest.json", "package.sha256"])
    for file, digest in manifest["files"].items():
        assert hashlib.sha256((pkg / file).read_bytes()).hexdigest() == digest
    for launch in manifest["launches"]:
        ptx = (pkg / launch["ptx"]).read_text()
        assert len((pkg / launch["cubin"]).read_bytes()) > 1000
        entry = re.search(rf"\.entry {launch['kernel']}\((.*?)\)", ptx, re.DOTALL)
        assert entry is not None
        assert entry.group(1).count(".param") == len(launch["params"])
        assert launch["threads"] == 32 * launch["num_warps"] == 32 * manifest["config"]["num_warps"]
        assert f".reqntid {launch['threads']}" in ptx and f".target {arch}" in ptx
        assert any(p["kind"] == "null_pointer" for p in launch["params"])  # Triton's scratch
        assert f"def {launch['kernel']}(" in (pkg / "kernel_triton.py").read_text()
    assert (manifest["dataflow"].get("file") == "dataflow.json") == (pkg / "dataflow.json").exists()


def test_manifest_records_arguments_buffers_and_outputs(packages: dict) -> None:
    scale = json.loads((packages["scale_", "sm_90"] / "manifest.json").read_text())
    assert scale["arguments"] == [
        {"name": "x", "kind": "tensor", "shape": [21, 30], "dtype": "float32",
         "strides": [1, 21], "align": 16, "written": True},
        {"name": "k", "kind": "scalar", "dtype": "int64"}]  # a Python int
    assert scale["buffers"] == [] and scale["returns"] == "single"
    assert scale["outputs"] == [{"arg": "x", "index": 0, "shape": [21, 30], "dtype": "float32"}]
    axpby = json.loads((packages["axpby", "sm_80"] / "manifest.json").read_text())
    assert [b["init"] for b in axpby["buffers"]] == ["empty", "arg", "arg"]  # alpha, beta
    kinds = [p["kind"] for p in axpby["launches"][0]["params"]]
    assert kinds[:5] == ["buffer", "buffer", "arg", "arg", "buffer"]
    norm = json.loads((packages["layer_norm", "sm_90"] / "manifest.json").read_text())
    (eps,) = [p for p in norm["launches"][0]["params"] if p["kind"] == "scalar"]
    assert eps == {"kind": "scalar", "name": "eps", "arg": "eps", "index": 3, "dtype": "float32"}
    assert norm["launches"][0]["constexprs"] == {"BLOCK_TM": 32}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", NAMES)
def test_launch_plan_computes_the_kernel(packages: dict, name: str, arch: str) -> None:
    _, args, ref = case(name)
    args = fresh(args) if name != "scale_" else (args[0].copy().T.copy().T, args[1])
    out = run_plan_on_cpu(packages[name, arch], args)
    td.testing.assert_close(out, ref, out.dtype)
    if name == "scale_":  # written in place: the argument holds the result too
        td.testing.assert_close(args[0], ref, np.float32)


def test_fill_values_and_kernels_that_return_nothing(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    x, y = (rng.standard_normal(77).astype(np.float32) for _ in range(2))
    pkg = export(masked_max, tmp_path / "mm", x, y, arch="sm_80")
    manifest = load(pkg).manifest
    assert manifest["buffers"] == [{"name": "out", "shape": [77], "dtype": "float32",
                                    "init": "full", "value": "-inf"}]
    ref = np.where(y > 0, np.maximum(x, y), -np.inf)
    np.testing.assert_array_equal(run_plan_on_cpu(pkg, (x, y)), ref)
    pkg = export(accumulate, tmp_path / "acc", x, y, arch="sm_80")
    manifest = load(pkg).manifest
    assert manifest["returns"] == "none" and manifest["outputs"] == []
    acc = x.copy()
    assert run_plan_on_cpu(pkg, (acc, y)) is None
    np.testing.assert_array_equal(acc, x + y)
    assert repr(load(pkg)).startswith("<aot kernel accumulate(acc: float32[77], y: float32[77]) "
                                      "-> None for sm_80")


def test_a_kernel_the_spatial_mapper_rejects_still_exports(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    kernel, args, _ = case("softmax")

    def source(*a: Any, target: str = "ir", **kw: Any) -> str:
        raise td.BackendError("the mapper says no")

    monkeypatch.setattr(kernel, "source", source)
    pkg = export(kernel, tmp_path / "pkg", *args, arch="sm_80")
    assert load(pkg).manifest["dataflow"] == {"error": "BackendError: the mapper says no"}
    assert not (pkg / "dataflow.json").exists()


def test_tma_is_turned_off_and_persistent_grids_are_recorded(tmp_path: Path) -> None:
    mod = example("matmul")
    args = mod.make_inputs(np.random.default_rng(2), {"m": 96, "k": 64, "n": 160}, np.float16)
    config = td.Config((32, 32, 16), 4, 3, group_m=4, tma=True, persistent=True)
    pkg = export(mod.matmul, tmp_path / "mm", *args, arch="sm_90", config=config)
    manifest = json.loads((pkg / "manifest.json").read_text())
    assert manifest["config"]["tma"] is False and manifest["config"]["persistent"] is True
    assert manifest["notes"] == [TMA_NOTE] and manifest["config_source"] == "given"
    (launch,) = manifest["launches"]
    assert launch["grid"] == {"programs": 15, "persistent": True}
    assert {"kind": "num_programs", "name": "num_programs", "programs": 15} in launch["params"]
    assert "_desc" not in (pkg / "kernel_triton.py").read_text()
    td.testing.assert_close(run_plan_on_cpu(pkg, args), mod.reference(*args), np.float16)


def test_config_is_given_tuned_or_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kernel, args, _ = case("softmax")
    with pytest.raises(td.ConfigError, match="is not a power of two"):
        export(kernel, tmp_path / "bad", *args, arch="sm_80", config=td.Config((3,)))
    tuned = td.Config((8,), num_warps=2, num_stages=2)
    monkeypatch.setattr(kernel, "tuned_config", lambda *_: tuned)
    manifest = json.loads((export(kernel, tmp_path / "t", *args, arch="sm_80") / "manifest.json")
                          .read_text())
    assert manifest["config_source"] == "tuned" and manifest["config"]["block_sizes"] == [8]
    assert manifest["launches"][0]["threads"] == 64


def test_export_replaces_packages_but_not_other_directories(tmp_path: Path) -> None:
    kernel, args, _ = case("softmax")
    pkg = export(kernel, tmp_path / "pkg", *args, arch="sm_80")
    (pkg / "stale.txt").write_text("left over")
    assert export(kernel, pkg, *args, arch="sm_90") == pkg
    assert not (pkg / "stale.txt").exists() and load(pkg).arch == "sm_90"
    other = tmp_path / "notes"
    other.mkdir()
    (other / "mine.txt").write_text("keep me")
    with pytest.raises(td.ArgumentError, match="holds no kernel package") as info:
        export(kernel, other, *args, arch="sm_80")
    assert info.value.kernel == "softmax" and (other / "mine.txt").exists()
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(td.ArgumentError, match="cannot write the package to") as info:
        export(kernel, blocker / "pkg", *args, arch="sm_80")  # under a file: no folder possible
    assert info.value.kernel == "softmax"


def test_kernels_needing_scratch_memory_are_refused(packages: dict) -> None:
    from lowering.backends.triton.compile import compile_module
    from lowering.backends.triton.codegen import generate_cached
    from lowering.backends.triton.package import _check_launchable
    from lowering.backends.triton.targets import array_strides

    kernel, args, _ = case("softmax")
    fn = kernel.traced(*args).lowered
    config = kernel.config_space(*args, backend="triton").default()
    module = generate_cached(fn, config, array_strides(fn, list(args)))
    (compiled,) = compile_module(module, "sm_80")
    _check_launchable(module.kernels[0], compiled, "sm_80")  # the real one is fine
    needy = dataclasses.replace(compiled, global_scratch_bytes=256)
    with pytest.raises(td.BackendError, match="256 bytes of global scratch memory"):
        _check_launchable(module.kernels[0], needy, "sm_80")


def test_old_or_modified_compile_cache_entries_are_misses(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A compiled.json from before param_count existed, or a cached cubin that is not the one
    compiled (its digest in compiled.json), is recompiled, not a crash nor a wrong package."""
    monkeypatch.setenv("TILEDSL_CACHE_DIR", str(tmp_path))
    kernel, args, _ = case("softmax")
    (first,) = kernel.compile(*args, arch="sm_80")
    meta = Path(first.cubin_path).parent / "compiled.json"
    old = json.loads(meta.read_text())["entry"]["compiled"]
    for key in ("param_count", "global_scratch_bytes", "profile_scratch_bytes"):
        del old[key]
    meta.write_text(json.dumps(old))  # an older tiledsl's entry: unsealed, fewer fields
    with pytest.warns(td.TileDSLWarning, match="compiled.json: it has no content digest"):
        (again,) = kernel.compile(*args, arch="sm_80")
    assert again.param_count == first.param_count > 1
    assert "param_count" in json.loads(meta.read_text())["entry"]["compiled"]
    original = first.cubin
    Path(first.cubin_path).write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    with pytest.warns(td.TileDSLWarning, match="cubin: its content does not match the digest"):
        (again,) = kernel.compile(*args, arch="sm_80")
    assert again.cubin == original


# ---- loading and calling -----------------------------------------------------------------------
class FakeGPUArray:
    """Just enough of a CUDA array for the checks, which run before any GPU work."""

    def __init__(self, shape: tuple, dtype: Any, strides: tuple | None = None) -> None:
        self.shape = shape
        self.dtype = np.dtype(dtype)
        nbytes = None if strides is None else tuple(s * self.dtype.itemsize for s in strides)
        self.__cuda_array_interface__ = {"shape": shape, "typestr": self.dtype.str,
                                         "strides": nbytes, "data": (1 << 20, False),
                                         "version": 3}


def gpu_like(a: np.ndarray) -> FakeGPUArray:
    return FakeGPUArray(a.shape, a.dtype, tuple(s // a.itemsize for s in a.strides))


def test_loaded_kernel_repr_and_manifest(packages: dict) -> None:
    k = load(packages["layer_norm", "sm_90"])
    assert isinstance(k, LoadedKernel) and k.manifest["kernel"] == "layer_norm"
    text = repr(k)
    assert text.startswith("<aot kernel layer_norm(x: float32[19, 45], weight: float32[45]")
    assert "eps: float64) -> float32[19, 45] for sm_90, 1 launch" in text
    assert "strides (1, 21)" in repr(load(packages["scale_", "sm_80"]))


@pytest.mark.parametrize("call, message", [
    (lambda k, x, w, b: k(x, w, b), r"takes 4 arguments \(x, weight, bias, eps\), got 3"),
    (lambda k, x, w, b: k(x, w, b, 1e-5, 2), "takes 4 arguments"),
    (lambda k, x, w, b: k(x, w, b, 1e-5, epsilon=1), "unexpected keyword argument 'epsilon'"),
    (lambda k, x, w, b: k(gpu_like(np.zeros((19, 44), np.float32)), w, b, 1e-5),
     r"argument 'x' has shape \(19, 44\); the package was compiled for shape \(19, 45\)"),
    (lambda k, x, w, b: k(x, gpu_like(np.zeros(45, np.float16)), b, 1e-5),
     "argument 'weight' has dtype float16; the package was compiled for float32"),
    (lambda k, x, w, b: k(gpu_like(np.zeros((45, 19), np.float32).T), w, b, 1e-5),
     r"argument 'x' has strides \(1, 19\) .*compiled for strides \(45, 1\)"),
    (lambda k, x, w, b: k(np.zeros((19, 45), np.float32), w, b, 1e-5),
     "argument 'x' is a NumPy array; this package runs on an NVIDIA GPU through CuPy"),
    (lambda k, x, w, b: k(x, w, 0.5, 1e-5), "argument 'bias' is a float; expected a GPU array"),
    (lambda k, x, w, b: k(x, w, b, "1e-5"), "argument 'eps' expects a real number"),
    (lambda k, x, w, b: k(x, w, b, True), "argument 'eps' expects a real number"),
    (lambda k, x, w, b: k(x, w, b, gpu_like(np.zeros(1))), "argument 'eps' expects a real"),
], ids=["too-few", "too-many", "keyword", "shape", "dtype", "strides", "numpy", "scalar-for-array",
        "string-for-scalar", "bool-for-float", "array-for-scalar"])
def test_arguments_are_checked_before_the_gpu(packages: dict, call: Any, message: str) -> None:
    k = load(packages["layer_norm", "sm_90"])
    x, w, b, _ = (gpu_like(a) if isinstance(a, np.ndarray) else a for a in case("layer_norm")[1])
    with pytest.raises(td.ArgumentError, match=message) as info:
        call(k, x, w, b)
    assert info.value.kernel == "layer_norm"


def test_integer_scalars_and_host_tensors_are_checked(packages: dict) -> None:
    k = load(packages["scale_", "sm_80"])
    x = gpu_like(scale_inputs()[0])
    with pytest.raises(td.ArgumentError, match=r"'k' expects an integer \(int64\), got float 1.5"):
        k(x, 1.5)
    with pytest.raises(td.ArgumentError, match="'k' is 9223372036854775808, out of the range of "
                       "int64"):
        k(x, 2**63)
    torch = pytest.importorskip("torch")
    with pytest.raises(td.ArgumentError, match="'x' is a torch.Tensor in host memory"):
        k(torch.zeros(21, 30).T, 3)
    with pytest.raises(td.ArgumentError, match="'x' is a torch tensor with its negative bit"):
        k(torch._neg_view(torch.zeros(21, 30).T), 3)


def test_valid_arguments_then_need_cupy(packages: dict) -> None:
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy is installed: the missing-CuPy message cannot be shown")
    except ImportError:
        pass
    k = load(packages["layer_norm", "sm_90"])
    args = [gpu_like(a) if isinstance(a, np.ndarray) else a for a in case("layer_norm")[1]]
    with pytest.raises(td.BackendError, match="pip install cupy-cuda13x"):
        k(*args)


def test_loading_and_calling_never_import_triton(packages: dict) -> None:
    code = f"""
import sys
import numpy as np
from tiledsl.interop.aot import load
from tiledsl.errors import ArgumentError, BackendError

class Fake:
    def __init__(self, a):
        self.shape, self.dtype = a.shape, a.dtype
        self.__cuda_array_interface__ = {{"shape": a.shape, "typestr": a.dtype.str, "strides": None,
                                          "data": (1 << 20, False), "version": 3}}

k = load({str(packages["softmax", "sm_90"])!r})
print(repr(k))
x = np.zeros((19, 45), np.float32)
try:
    k(x)
except ArgumentError as e:
    print(type(e).__name__, e)
try:
    import cupy  # with CuPy, a fake pointer must not reach a GPU
except ImportError:
    try:
        k(Fake(x))  # passes every check, then finds no CuPy
    except BackendError as e:
        print(type(e).__name__, e)
loaded = sorted(m for m in ("triton", "torch", "lowering") if m in sys.modules)
print("loaded:", loaded)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "ArgumentError" in result.stdout and "<aot kernel softmax" in result.stdout
    assert "loaded: []" in result.stdout


def forge(pkg: Path, manifest: dict, reseal: bool = True) -> Path:
    """Write `manifest` into package `pkg` as a forger who knows the format would: every listed
    file's checksum made to match, and (if `reseal`) package.sha256 too, so only the checks that
    do not trust the manifest can find an edit."""
    contents = {}
    for name in manifest["files"]:
        f = pkg / name
        if f.is_file() and pkg in f.parents:
            contents[name] = f.read_bytes()
            manifest["files"][name] = hashlib.sha256(contents[name]).hexdigest()
    (pkg / "manifest.json").write_text(json.dumps(manifest))
    if reseal:
        (pkg / "package.sha256").write_text(package_digest(manifest, contents))
    return pkg


def _symlink_out(pkg: Path, name: str) -> None:
    outside = pkg.parent / f"outside-{name}"
    (pkg / name).replace(outside)
    (pkg / name).symlink_to(outside)


def _move(items: list, i: int, j: int) -> None:
    items[i], items[j] = items[j], items[i]


def _params(m: dict) -> list:
    return m["launches"][0]["params"]


# Edits of the matmul package (fp16 a, b; an out buffer; a persistent grid's num_programs), each
# with the message load gives: resealed (a consistent forgery) unless the case says otherwise.
EDITS: dict[str, tuple[Any, str]] = {
    "smaller-output": (lambda m, p: [m["buffers"][0].update(shape=[37, 5]),
                                     m["outputs"][0].update(shape=[37, 5])],
                       "out_ptr was compiled for 1480 elements of float16, but out is 185"),
    "output-shape-only": (lambda m, p: m["outputs"][0].update(shape=[37, 5]),
                          r"output out is float16\[37, 5\], but out is float16\[37, 40\]"),
    "float32-for-fp16": (lambda m, p: m["arguments"][0].update(dtype="float32"),
                         "a_ptr was compiled for 1776 elements of float16, but a is 1776 elements "
                         "of float32"),
    "swapped-params": (lambda m, p: _move(_params(m), 0, 1),
                       r"its parameters are \(b_ptr, a_ptr, .*the generated kernel's are "
                       r"\(a_ptr, b_ptr"),
    "swapped-arguments": (lambda m, p: [_params(m)[0].update(arg="b", index=1),
                                        _params(m)[1].update(arg="a", index=0)],
                          "a_ptr was compiled for 1776 elements of float16, but b is 1920"),
    "dropped-param": (lambda m, p: _params(m).pop(2),
                      "the manifest passes 6 parameters, the PTX entry takes 7"),
    "pointer-for-scalar": (lambda m, p: _params(m).__setitem__(3, {"kind": "null_pointer",
                                                                  "name": "num_programs"}),
                           r"parameter 3 \(num_programs\) is passed as a pointer, the PTX takes "
                           r"\.u32"),
    "grid-2**70": (lambda m, p: m["launches"][0]["grid"].update(programs=2**70),
                   "schema at launches/0/grid/programs"),
    "grid-not-num-programs": (lambda m, p: m["launches"][0]["grid"].update(programs=2),
                              "num_programs of 1 programs, but the grid has 2"),
    "arch-changed": (lambda m, p: m.update(arch="sm_80"),
                     "the PTX is for sm_90, the manifest says sm_80"),
    "arch-unknown": (lambda m, p: m.update(arch="sm_75"), "schema at arch"),
    "align-1": (lambda m, p: m["arguments"][0].update(align=1), "schema at arguments/0"),
    "strides-huge": (lambda m, p: m["arguments"][1].update(strides=[2**50, 1]),
                     "schema at arguments/1"),
    "threads": (lambda m, p: m["launches"][0].update(threads=256, num_warps=8),
                "the PTX requires 128 threads per block, the manifest launches 256"),
    "shared-memory": (lambda m, p: m["launches"][0].update(static_shared_bytes=4096,
                                                          shared_bytes=227 * 1024),
                      "bytes of shared memory, more than the 232448 of sm_90"),
    "kernel-renamed": (lambda m, p: m["launches"][0].update(kernel="other_kernel"),
                       "the PTX has no entry point other_kernel"),
    "file-outside": (lambda m, p: m["files"].update({"/etc/hostname": "0" * 64}),
                     "schema at files"),
    "file-dotdot": (lambda m, p: m["files"].update({"../manifest.json": "0" * 64}),
                    "schema at files"),
    "cubin-symlink": (lambda m, p: _symlink_out(p, "matmul_kernel.cubin"),
                      "matmul_kernel.cubin is refused: it is a symbolic link"),
    "manifest-symlink": (lambda m, p: forge(p, m) and _symlink_out(p, "manifest.json"),
                         "manifest.json is refused: it is a symbolic link"),
    "cubin-of-another-kernel": (lambda m, p: (p / "matmul_kernel.cubin").write_bytes(
        (p.parent / "softmax.cubin").read_bytes()),
        "the cubin has no section .nv.info.matmul_kernel"),
    "cubin-truncated": (lambda m, p: (p / "matmul_kernel.cubin").write_bytes(
        (p / "matmul_kernel.cubin").read_bytes()[:300]), "the cubin is truncated"),
    "no-digest": (lambda m, p: (p / "package.sha256").unlink(), "lacks package.sha256"),
}
NOT_RESEALED = {  # edits only the digest can find: what a forger cannot keep consistent
    "cubin-bytes-and-checksum": (lambda m, p: (p / "matmul_kernel.cubin").write_bytes(
        (p / "matmul_kernel.cubin").read_bytes()[:-1] + b"\1"), "was modified after export"),
    "fill-pattern": (lambda m, p: m["buffers"][0].update(init="full", value=0),
                     "was modified after export"),
}


@pytest.mark.parametrize("kind", [*EDITS, *NOT_RESEALED])
def test_broken_packages_fail_at_load(packages: dict, tmp_path: Path, kind: str) -> None:
    """Every kind of edit fails at load, before any GPU work, saying what does not match."""
    import shutil
    src = packages["matmul", "sm_90"]
    manifest = json.loads((src / "manifest.json").read_text())
    assert _params(manifest)[3]["kind"] == "num_programs"  # what the edits assume
    shutil.copy(packages["softmax", "sm_90"] / "softmax_kernel.cubin", tmp_path / "softmax.cubin")
    pkg = Path(shutil.copytree(src, tmp_path / "pkg"))
    edit, message = EDITS.get(kind) or NOT_RESEALED[kind]
    edit(manifest, pkg)
    if kind != "manifest-symlink" and (pkg / "package.sha256").exists():
        forge(pkg, manifest, reseal=kind in EDITS)
    with pytest.raises(td.BackendError, match=message):
        load(pkg)


def test_package_checks_against_what_they_trust(packages: dict, tmp_path: Path) -> None:
    import shutil
    from lowering.backends.triton.space import SHARED_BYTES
    assert package_check.SHARED_BYTES == SHARED_BYTES  # the frontend's copy of the device limits
    with pytest.raises(td.BackendError, match="is not a tiledsl kernel package"):
        load(tmp_path)
    pkg = Path(shutil.copytree(packages["softmax", "sm_80"], tmp_path / "pkg"))
    manifest = json.loads((pkg / "manifest.json").read_text())
    cubin = pkg / manifest["launches"][0]["cubin"]
    cubin.write_bytes(cubin.read_bytes() + b"\0")
    with pytest.raises(td.BackendError, match="does not match the checksum"):
        load(pkg)
    manifest["format_version"] = 99
    (pkg / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(td.BackendError, match="format version 99"):
        load(pkg)
    os.mkfifo(pkg / "fifo")
    manifest["format_version"] = FORMAT_VERSION
    manifest["files"]["fifo"] = "0" * 64
    (pkg / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(td.BackendError, match="fifo is refused: it is a FIFO"):
        load(pkg)  # rather than blocking forever


def test_load_ties_launch_files_and_returns_to_the_manifest(tmp_path: Path) -> None:
    import shutil
    rng = np.random.default_rng(6)
    x, y = (rng.standard_normal(33).astype(np.float32) for _ in range(2))
    src = export(masked_max, tmp_path / "mm", x, y, arch="sm_80")
    manifest = json.loads((src / "manifest.json").read_text())
    launch = manifest["launches"][0]

    def broken(edit: Any, remove: str | None = None) -> Path:
        pkg = tmp_path / "broken"
        shutil.rmtree(pkg, ignore_errors=True)
        shutil.copytree(src, pkg)
        m = json.loads(json.dumps(manifest))
        edit(m)
        if remove:
            (pkg / remove).unlink()
        return forge(pkg, m)
    for key in ("cubin", "ptx"):  # unlisted (and gone): its checksum was never checked
        pkg = broken(lambda m, name=launch[key]: m["files"].pop(name), remove=launch[key])
        with pytest.raises(td.BackendError, match=f"masked_max_kernel: {key} "
                                                  f"'{launch[key]}' is not listed in files"):
            load(pkg)
    with pytest.raises(td.BackendError, match="returns is 'single', which needs 1 outputs, but "
                                              "outputs lists 0"):
        load(broken(lambda m: m.update(outputs=[])))
    with pytest.raises(td.BackendError, match="returns is 'none', which needs 0 outputs, but "
                                              "outputs lists 1"):
        load(broken(lambda m: m.update(returns="none")))
    assert load(broken(lambda m: m.update(returns="tuple"))).manifest["returns"] == "tuple"


def test_cli_exports_a_package(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sm_pkg"
    assert main(["export", f"{ROOT / 'examples' / 'softmax.py'}::softmax", "--arch", "sm_80",
                 "--out", str(out)]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].split() == ["kernel", "arch", "config", "from", "launches",
                                             "package"]
    assert "softmax" in table and str(out) in table
    assert load(out).manifest["arch"] == "sm_80"
    assert main(["export", str(ROOT / "examples" / "softmax.py"), "--arch", "sm_7",
                 "--out", str(tmp_path / "x")]) == 1
    assert "unknown architecture 'sm_7'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["export", "--help"])
    assert info.value.code == 0 and "usage: tiledsl export" in capsys.readouterr().out


# ---- tiledsl.interop.aot's launcher, with a stand-in for CuPy ------------------------------------------
PTX_KIND = {".u64 .ptr": "pointer", ".f32": "float32", ".u32": "int32", ".u64": "int64",
            ".u8": "bool"}
NUMPY_KIND = {np.float32: "float32", np.int32: "int32", np.int64: "int64", np.bool_: "bool"}


class FakeCupyArray:
    """A CuPy array backed by a NumPy one: what tiledsl.interop.aot reads, and a pointer to the data."""

    def __init__(self, host: np.ndarray) -> None:
        self.host = host
        self.shape, self.dtype, self.strides = host.shape, host.dtype, host.strides
        self.itemsize = host.itemsize
        self.data = types.SimpleNamespace(ptr=host.ctypes.data)
        self.device = types.SimpleNamespace(id=0)
        self.__cuda_array_interface__ = {"shape": host.shape, "typestr": host.dtype.str,
                                         "strides": host.strides, "data": (self.data.ptr, False),
                                         "version": 3}


class FakeKernel:
    """A cubin's entry point. Called as CuPy calls a RawKernel, it checks every argument against
    the PTX parameter types (pointer, f32, u32, u64, u8), then runs the package's
    kernel_triton.py under Triton's interpreter with the cubin's constexprs."""

    def __init__(self, cubin: Path, name: str, launches: list) -> None:
        self.cubin, self.name, self.launches = cubin, name, launches
        self.max_dynamic_shared_size_bytes = 48 * 1024

    def __call__(self, grid: tuple, block: tuple, args: tuple, shared_mem: int = 0) -> None:
        from lowering.backends.triton.interpret import interpreted_stdlib, to_torch
        from lowering.backends.triton.loader import load as load_module

        pkg = self.cubin.parent
        manifest = json.loads((pkg / "manifest.json").read_text())
        (launch,) = [x for x in manifest["launches"] if x["kernel"] == self.name]
        self.launches.append((grid, block, shared_mem, self.max_dynamic_shared_size_bytes))
        assert shared_mem <= self.max_dynamic_shared_size_bytes
        ptx = (pkg / launch["ptx"]).read_text()
        entry = re.search(rf"\.entry {self.name}\((.*?)\)", ptx, re.DOTALL)
        assert entry is not None
        kinds = [PTX_KIND[m] for m in re.findall(r"\.param (\.u64 \.ptr|\.\w+)", entry.group(1))]
        assert len(args) == len(kinds)
        call = []
        for a, kind in zip(args, kinds):
            if isinstance(a, FakeCupyArray):
                assert kind == "pointer"
                call.append(to_torch(a.host))
            elif isinstance(a, np.uint64):
                assert kind == "pointer" and a == 0  # a hidden scratch pointer
            else:
                assert NUMPY_KIND[type(a)] == kind, (type(a), kind)
                call.append(a.item())
        module = load_module((pkg / "kernel_triton.py").read_text(), interpret=True)
        with interpreted_stdlib():
            getattr(module, self.name)[grid](*call, **launch["constexprs"])


@pytest.fixture
def fake_cupy(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """`import cupy` gives a stand-in with one device of 3 SMs whose compute capability the
    test sets; its kernels run under Triton's interpreter."""
    pytest.importorskip("torch")
    state = types.SimpleNamespace(cc="90", launches=[], modules=[])

    class Device:
        def __init__(self, id: int = 0) -> None:  # noqa: A002 (CuPy's name)
            self.id = id
            self.compute_capability = state.cc
            self.attributes = {"MultiProcessorCount": INTERPRETER_SMS}

        def __enter__(self) -> Device:
            return self

        def __exit__(self, *exc: Any) -> None:
            pass

    class RawModule:
        def __init__(self, *, path: str) -> None:
            state.modules.append(path)
            self.path = Path(path)

        def get_function(self, name: str) -> FakeKernel:
            return FakeKernel(self.path, name, state.launches)

    def empty(shape: tuple, dtype: Any) -> FakeCupyArray:  # garbage, as on a GPU
        dtype = np.dtype(dtype)
        return FakeCupyArray(np.full(shape, np.nan if dtype.kind == "f" else 77, dtype))

    def full(shape: tuple, value: Any, dtype: Any) -> FakeCupyArray:
        return FakeCupyArray(np.full(shape, value, dtype))

    def from_dlpack(x: Any) -> Any:
        assert isinstance(x, FakeCupyArray)
        return x

    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(Device=Device)  # type: ignore[attr-defined]
    cupy.RawModule = RawModule  # type: ignore[attr-defined]
    cupy.empty = empty  # type: ignore[attr-defined]
    cupy.full = full  # type: ignore[attr-defined]
    cupy.from_dlpack = from_dlpack  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    return state


def on_fake_gpu(args: tuple) -> list:
    return [FakeCupyArray(a) if isinstance(a, np.ndarray) else a for a in args]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", NAMES)
def test_loaded_kernel_launches_the_cubins(packages: dict, fake_cupy: types.SimpleNamespace,
                                           name: str, arch: str) -> None:
    """LoadedKernel.__call__ end to end: the CuPy calls it makes launch the right kernels with
    the right grids and argument types, and compute the kernel."""
    fake_cupy.cc = arch[3:]
    _, args, ref = case(name)
    gpu_args = on_fake_gpu(fresh(args) if name != "scale_" else (args[0].T.copy().T, args[1]))
    k = load(packages[name, arch])
    out = k(*gpu_args)
    assert isinstance(out, FakeCupyArray)
    if name == "scale_":
        assert out is gpu_args[0]
    td.testing.assert_close(out.host, ref, out.dtype)
    (launch,) = k.manifest["launches"]
    assert fake_cupy.launches == [((launch["grid"]["programs"],), (launch["threads"],),
                                   launch["shared_bytes"], max(launch["shared_bytes"], 48 * 1024))]
    k(*gpu_args)  # the second call reuses the loaded module
    assert len(fake_cupy.modules) == 1 and len(fake_cupy.launches) == 2


def test_loaded_kernel_refuses_arguments_that_overlap_one_it_writes(
        tmp_path: Path, fake_cupy: types.SimpleNamespace) -> None:
    """As the kernel itself does: acc += y with y a view into acc would read elements other
    programs have already overwritten."""
    rng = np.random.default_rng(8)
    x, y = (rng.standard_normal(77).astype(np.float32) for _ in range(2))
    k = load(export(accumulate, tmp_path / "acc", x, y, arch="sm_90"))
    assert [a["written"] for a in k.manifest["arguments"]] == [True, False]
    both = rng.standard_normal(157).astype(np.float32)  # views at 16-byte aligned offsets
    with pytest.raises(td.ArgumentError, match="arguments 'acc' and 'y' share memory, and the "
                       "kernel writes 'acc' in place"):
        k(FakeCupyArray(both[:77]), FakeCupyArray(both[40:117]))
    assert fake_cupy.launches == []  # refused before any launch
    acc, before = FakeCupyArray(both[:77]), both[:77].copy()
    k(acc, FakeCupyArray(both[80:]))  # side by side in one allocation: no overlap
    np.testing.assert_array_equal(acc.host, before + both[80:])


def test_a_package_returns_an_optional_output_as_none(
        tmp_path: Path, fake_cupy: types.SimpleNamespace) -> None:
    """`return o, sums` with sums None (not asked for): the manifest spells the tuple, the
    loaded kernel returns None in its place, and a manifest whose form needs other outputs
    than it lists is refused at load."""
    x = np.random.default_rng(9).standard_normal((19, 24)).astype(np.float32)
    pkg = export(scaled_rows, tmp_path / "rows", x, 0.5, arch="sm_90")
    manifest = load(pkg).manifest
    assert manifest["returns"] == "tuple:tensor,None" and len(manifest["outputs"]) == 1
    o, sums = load(pkg)(FakeCupyArray(x), 0.5)
    assert sums is None
    td.testing.assert_close(o.host, x.astype(np.float64) * 0.5, np.float32)
    with pytest.raises(td.BackendError, match="returns is 'tuple:tensor,tensor', which needs 2 "
                                              "outputs, but outputs lists 1"):
        load(forge(pkg, {**manifest, "returns": "tuple:tensor,tensor"}))
    with pytest.raises(td.BackendError, match="returns"):
        load(forge(pkg, {**manifest, "returns": "tuple:tensor,Nothing"}))
    with pytest.raises(td.BackendError, match="'tuple:tensor,\\[None,tensor\\]', which needs 2"):
        load(forge(pkg, {**manifest, "returns": "tuple:tensor,[None,tensor]"}))  # (nested)
    with pytest.raises(td.BackendError, match="malformed return form"):
        load(forge(pkg, {**manifest, "returns": "tuple:tensor,[None"}))
    o, [none] = load(forge(pkg, {**manifest, "returns": "tuple:tensor,[None]"}))(
        FakeCupyArray(x), 0.5)
    assert none is None


def test_loaded_kernel_persistent_grids_and_large_shared_memory(
        tmp_path: Path, fake_cupy: types.SimpleNamespace) -> None:
    mod = example("matmul")
    args = mod.make_inputs(np.random.default_rng(3), {"m": 130, "k": 128, "n": 70}, np.float16)
    config = td.Config((128, 64, 64), 4, 3, group_m=8, persistent=True)
    k = load(export(mod.matmul, tmp_path / "mm", *args, arch="sm_90", config=config))
    (launch,) = k.manifest["launches"]
    assert launch["shared_bytes"] > 48 * 1024 and launch["grid"]["programs"] == 4
    out = k(*on_fake_gpu(args))
    td.testing.assert_close(out.host, mod.reference(*args), np.float16)
    shared = launch["shared_bytes"]
    assert fake_cupy.launches == [((INTERPRETER_SMS,), (128,), shared, shared)]


def test_loaded_kernel_checks_device_and_alignment(packages: dict,
                                                   fake_cupy: types.SimpleNamespace) -> None:
    k = load(packages["softmax", "sm_90"])
    (x,) = case("softmax")[1]
    fake_cupy.cc = "80"
    with pytest.raises(td.BackendError, match="cubins for sm_90; device 0 is sm_80: export it "
                                              "again with arch='sm_80'"):
        k(FakeCupyArray(x.copy()))
    fake_cupy.cc = "90"
    unaligned = np.empty(x.size + 1, x.dtype)[1:].reshape(x.shape)
    with pytest.raises(td.ArgumentError, match="'x' starts at an address not aligned to 16"):
        k(FakeCupyArray(unaligned))
    assert fake_cupy.launches == []


# ---- on a real GPU -----------------------------------------------------------------------------
def _cupy_gpu() -> Any:
    try:
        import cupy
        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:
        return None


@pytest.mark.gpu
@pytest.mark.skipif(_cupy_gpu() is None, reason="needs CuPy and an NVIDIA GPU")
@pytest.mark.parametrize("name", NAMES)
def test_package_runs_on_the_gpu(name: str, tmp_path: Path) -> None:
    cupy = _cupy_gpu()
    arch = f"sm_{cupy.cuda.Device().compute_capability}"
    if arch not in ARCHS:
        pytest.skip(f"no package arch for {arch}")
    kernel, args, ref = case(name)
    k = load(export(kernel, tmp_path / name, *args, arch=arch))
    gpu_args = [cupy.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    if name == "scale_":  # the transposed layout the package was exported for
        gpu_args[0] = cupy.asarray(args[0].T).T
    out = k(*gpu_args)
    cupy.cuda.get_current_stream().synchronize()
    assert isinstance(out, cupy.ndarray)
    if name == "scale_":
        assert out is gpu_args[0]
    td.testing.assert_close(cupy.asnumpy(out), ref, out.dtype)


def test_kernel_export_method_and_td_load(tmp_path: Path) -> None:
    args = example("softmax").make_inputs(np.random.default_rng(0))
    assert td.load(kernel_of("softmax").export(tmp_path / "p", *args, arch="sm_80")).name == \
        "softmax"


def test_a_registered_knob_exports_its_own_trace(tmp_path: Path) -> None:
    mod = example("matmul_split_k")
    args = mod.make_inputs(np.random.default_rng(3), {"m": 19, "k": 512, "n": 21})
    config = mod.matmul_split_k.config_space(*args, backend="triton").default().replace(split_k=8)
    pkg = export(mod.matmul_split_k, tmp_path / "sk", *args, arch="sm_80", config=config)
    assert "8 of outer_k" in (pkg / "kernel_triton.py").read_text()
    td.testing.assert_close(run_plan_on_cpu(pkg, args), mod.reference(*args), np.float32)


def test_a_package_returns_the_numbers_its_trace_computed(
        tmp_path: Path, fake_cupy: types.SimpleNamespace) -> None:
    """Liger's `return y, BLOCK_SIZE, ...`: the manifest spells each number, the loaded kernel
    returns them in their places, and a manifest with a malformed number is refused at load."""
    x = np.random.default_rng(10).standard_normal((7, 20)).astype(np.float32)
    pkg = export(sized_rows, tmp_path / "sized", x, arch="sm_90")
    manifest = load(pkg).manifest
    assert manifest["returns"] == "tuple:tensor,int:32,float:5.0,bool:True"
    o, *numbers = load(pkg)(FakeCupyArray(x))
    assert numbers == [32, 5.0, True] and [type(n) for n in numbers] == [int, float, bool]
    td.testing.assert_close(o.host, x.astype(np.float64) + 1, np.float32)
    with pytest.raises(td.BackendError, match="returns"):
        load(forge(pkg, {**manifest, "returns": "tuple:tensor,int:thirty"}))
