"""Checking an ahead-of-time kernel package before anything of it reaches a GPU.

A package's manifest tells a raw cuLaunchKernel what to pass, so every part of it that a launch
trusts is checked at load, in this order:

1. files: manifest.json and every file it lists are regular files directly in the package
   (plain names: no links, no `..`, no absolute paths) of bounded size;
2. the manifest against its JSON schema (manifest.schema.json), whose bounds are what the
   device allows (a 1-D grid of at most 2**31 - 1 blocks, 1024 threads, the arch's shared
   memory), and its cross references (`check_references`);
3. integrity: each file against its SHA-256 in the manifest, and package.sha256, a digest over
   the manifest's canonical JSON and every file's bytes (`package_digest`), so an edit of the
   manifest or of a file is found even where it keeps the two consistent;
4. each launch against the kernel's own PTX and cubin (tiledsl/interop/cubin.py): its entry point, the
   architecture, the threads per block, and the parameter list (count, order, pointer or
   scalar, each one's size), and against the generated kernel_triton.py's parameter names;
5. each pointer parameter's dtype and extent (what the cubin was compiled to address) against
   the argument or buffer the plan binds to it, so no buffer is smaller than the cubin writes.

What no file but the manifest records (the shapes and dtypes a cubin was specialized for) is
covered by the digest alone: an edit that also rewrites package.sha256 and every record of a
shape consistently is not detectable without a signature from a trusted key.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from tiledsl.interop.cubin import CubinError, cubin_entry, ptx_entry
from tiledsl.errors import BackendError
from tiledsl.runtime.paths import UnsafeFile, read_regular_file
from tiledsl.runtime.returns import outputs_needed

MANIFEST = "manifest.json"
DIGEST = "package.sha256"
TRITON_MODULE = "kernel_triton.py"
MAX_MANIFEST_BYTES = 16 << 20
MAX_FILE_BYTES = 256 << 20
# The GPUs' shared memory per block (lowering/backends/triton/space.py's table; a test keeps the
# two equal) and the architecture numbers the PTX and cubin name.
SHARED_BYTES = {"sm_80": 163 * 1024, "sm_86": 99 * 1024, "sm_89": 99 * 1024, "sm_90": 227 * 1024}
MAX_TENSOR_BYTES = 1 << 48
_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "int16": 2,
             "int32": 4, "int64": 8, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1}
# PTX parameter types a plan's parameter kinds may take
_SCALAR_PTX = {"float32": {".f32", ".b32"}, "int32": {".u32", ".s32", ".b32"},
               "int64": {".u64", ".s64", ".b64"}, "bool": {".u8", ".s8", ".b8"}}


@cache
def schema() -> dict[str, Any]:
    """The JSON Schema of manifest.json (shipped in the package)."""
    return json.loads(files("tiledsl.interop").joinpath("manifest.schema.json").read_text())


def read_package(root: Path, format_name: str, version: int) -> dict[str, Any]:
    """The manifest of the package in directory `root`, with everything above checked; raises
    BackendError naming the first problem."""
    data = _read(root, MANIFEST, MAX_MANIFEST_BYTES)
    try:
        manifest = json.loads(data)
    except ValueError as e:
        raise BackendError(f"{root / MANIFEST} is not valid JSON: {e}") from None
    if isinstance(manifest, dict) and manifest.get("format") == format_name \
            and manifest.get("format_version") != version:
        raise BackendError(f"{root / MANIFEST} has package format version "
                           f"{manifest.get('format_version')!r}; this tiledsl reads version "
                           f"{version} (re-export the kernel with this tiledsl)")
    validate_manifest(manifest, str(root / MANIFEST))
    contents = {name: _read(root, name, MAX_FILE_BYTES) for name in manifest["files"]}
    for name, digest in manifest["files"].items():
        if hashlib.sha256(contents[name]).hexdigest() != digest:
            raise BackendError(f"{root / name} does not match the checksum in its manifest "
                               "(modified or from another export)")
    recorded = _read(root, DIGEST, 1024).decode(errors="replace").strip()
    if recorded != package_digest(manifest, contents):
        raise BackendError(f"package {root} was modified after export: {DIGEST} does not match "
                           "its manifest and files (re-export it)")
    for launch in manifest["launches"]:
        check_launch(launch, manifest, contents)
    return manifest


def package_digest(manifest: dict[str, Any], contents: dict[str, bytes]) -> str:
    """SHA-256 over the manifest's canonical JSON and each listed file's name and bytes."""
    h = hashlib.sha256(json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode())
    for name in sorted(contents):
        h.update(b"\0" + name.encode() + b"\0" + hashlib.sha256(contents[name]).digest())
    return h.hexdigest()


def _read(root: Path, name: str, limit: int) -> bytes:
    if "/" in name or "\\" in name or name in ("", ".", ".."):  # the schema refuses these too
        raise BackendError(f"package {root}: {name!r} is not a plain file name in the package")
    try:
        return read_regular_file(root / name, limit)
    except FileNotFoundError:
        if name == MANIFEST:
            raise BackendError(f"{root} is not a tiledsl kernel package (no {MANIFEST}); write "
                               "one with kernel.export(path, *args) or `tiledsl export FILE "
                               "--out DIR`") from None
        raise BackendError(f"package {root} lacks {name}"
                           + ("" if name == DIGEST else ", which its manifest lists")) from None
    except UnsafeFile as e:
        raise BackendError(f"package {root}: {name} is refused: {e} (a package holds only "
                           "regular files of its own)") from None
    except OSError as e:
        raise BackendError(f"package {root}: cannot read {name}: {e.strerror or e}") from None


def validate_manifest(manifest: Any, where: str = MANIFEST) -> None:
    """Raise BackendError naming the first place where `manifest` breaks the schema, or where
    its parts do not refer to each other consistently (a parameter naming an unknown buffer)."""
    from tiledsl.interop.schema_check import first_violation

    violation = first_violation(schema(), manifest)
    if violation:
        raise BackendError(f"{where} does not match the package schema {violation}")
    check_references(manifest, where)


def check_references(m: dict[str, Any], where: str) -> None:
    """The cross references and bounds a schema cannot express."""
    args = {a["name"]: (i, a["kind"]) for i, a in enumerate(m["arguments"])}
    buffers = {b["name"]: b for b in m["buffers"]}
    problems = []
    if len(args) != len(m["arguments"]) or len(buffers) != len(m["buffers"]):
        problems.append("duplicate argument or buffer names")
    for t in [*m["arguments"], *m["buffers"]]:
        if "shape" in t and _bytes(t) > MAX_TENSOR_BYTES:
            problems.append(f"{t['name']} has {_bytes(t)} bytes, more than a GPU holds")
    for b in m["buffers"]:
        if b["init"] == "arg" and args.get(b.get("arg", ""), (0, ""))[1] != "scalar":
            problems.append(f"buffer {b['name']} is filled from {b.get('arg')!r}, not a scalar")
        if b["init"] in ("randint", "pyrandint") and not b["low"] < b["high"]:
            problems.append(f"buffer {b['name']} draws ints in [{b['low']}, {b['high']}), "
                            "an empty range")
    for o in m["outputs"]:
        if "buffer" in o and o["buffer"] not in buffers:
            problems.append(f"output names unknown buffer {o['buffer']!r}")
        elif "arg" in o and args.get(o["arg"]) != (o["index"], "tensor"):
            problems.append(f"output names {o['arg']!r}, not tensor argument {o['index']}")
        else:
            t = buffers[o["buffer"]] if "buffer" in o else m["arguments"][o["index"]]
            if (t["shape"], t["dtype"]) != (o["shape"], o["dtype"]):
                problems.append(f"output {t['name']} is {_type(o)}, but {t['name']} is {_type(t)}")
    try:
        needed = outputs_needed(m["returns"])  # "tuple": any number
    except ValueError as e:
        problems.append(f"returns: {e}")
        needed = None
    if needed is not None and len(m["outputs"]) != needed:
        problems.append(f"returns is {m['returns']!r}, which needs {needed} outputs, but "
                        f"outputs lists {len(m['outputs'])}")
    for launch in m["launches"]:
        problems += _launch_references(launch, m, args, buffers)
    if problems:
        raise BackendError(f"{where} is inconsistent: " + "; ".join(problems))


def _launch_references(launch: dict[str, Any], m: dict[str, Any], args: dict[str, Any],
                       buffers: dict[str, Any]) -> list[str]:
    name, problems = launch["kernel"], []
    for key in ("cubin", "ptx"):
        if launch[key] not in m["files"]:
            problems.append(f"{name}: {key} {launch[key]!r} is not listed in files (so its "
                            "checksum is never checked)")
    if launch["threads"] != 32 * launch["num_warps"]:
        problems.append(f"{name}: threads {launch['threads']} is not 32 * num_warps "
                        f"({launch['num_warps']})")
    limit = SHARED_BYTES[m["arch"]]
    if launch["shared_bytes"] + launch["static_shared_bytes"] > limit:
        problems.append(f"{name}: {launch['shared_bytes']} + {launch['static_shared_bytes']} "
                        f"bytes of shared memory, more than the {limit} of {m['arch']}")
    for p in launch["params"]:
        kind = {"arg": "tensor", "scalar": "scalar"}.get(p["kind"])
        if kind and args.get(p["arg"]) != (p["index"], kind):
            problems.append(f"{name}: parameter {p['name']} names {p['arg']!r}, not {kind} "
                            f"argument {p['index']}")
        elif p["kind"] == "buffer" and p["buffer"] not in buffers:
            problems.append(f"{name}: unknown buffer {p['buffer']!r}")
        elif p["kind"] == "num_programs" and p["programs"] != launch["grid"]["programs"]:
            problems.append(f"{name}: num_programs of {p['programs']} programs, but the grid "
                            f"has {launch['grid']['programs']}")
        elif p["kind"] in ("arg", "buffer"):
            t = m["arguments"][p["index"]] if p["kind"] == "arg" else buffers[p["buffer"]]
            got = (t["dtype"], _span(t))
            if got != (p["dtype"], p["extent"]):
                problems.append(f"{name}: parameter {p['name']} was compiled for "
                                f"{p['extent']} elements of {p['dtype']}, but {t['name']} is "
                                f"{got[1]} elements of {got[0]}")
    return problems


def _span(t: dict[str, Any]) -> int:
    """Elements from the lowest to the highest one the tensor addresses (as the export's)."""
    strides = t.get("strides")
    if strides is None:
        return math.prod(t["shape"])
    return 1 + sum((n - 1) * abs(s) for n, s in zip(t["shape"], strides))


def _bytes(t: dict[str, Any]) -> int:
    return _span(t) * _ITEMSIZE[t["dtype"]]


def _type(t: dict[str, Any]) -> str:
    return f"{t['dtype']}[{', '.join(map(str, t['shape']))}]"


def check_launch(launch: dict[str, Any], m: dict[str, Any], contents: dict[str, bytes]) -> None:
    """The launch against the entry point its PTX and cubin declare, and the names of the
    generated kernel's parameters."""
    name = launch["kernel"]
    try:
        ptx = ptx_entry(contents[launch["ptx"]].decode(errors="replace"), name)
        cubin = cubin_entry(contents[launch["cubin"]], name)
    except CubinError as e:
        raise BackendError(f"launch {name}: {e}") from None
    problems = []
    want = int(m["arch"].removeprefix("sm_"))
    for what, entry in (("PTX", ptx), ("cubin", cubin)):
        if entry.sm != want:
            problems.append(f"the {what} is for sm_{entry.sm}, the manifest says {m['arch']}")
        if entry.threads is not None and entry.threads != launch["threads"]:
            problems.append(f"the {what} requires {entry.threads} threads per block, the "
                            f"manifest launches {launch['threads']}")
    params = launch["params"]
    if not len(params) == len(ptx.params) == len(cubin.params):
        problems.append(f"the manifest passes {len(params)} parameters, the PTX entry takes "
                        f"{len(ptx.params)} and the cubin {len(cubin.params)}")
    else:
        for i, (p, (ptype, size), (_, csize)) in enumerate(zip(params, ptx.params, cubin.params)):
            if not _fits(p, ptype) or size != csize:
                problems.append(f"parameter {i} ({p['name']}) is passed as {_passed(p)}, the PTX "
                                f"takes {ptype} ({size} bytes) and the cubin {csize} bytes")
    problems += _python_names(launch, contents.get(TRITON_MODULE))
    if problems:
        raise BackendError(f"launch {name} does not match its kernel: " + "; ".join(problems))


def _fits(p: dict[str, Any], ptype: str) -> bool:
    if p["kind"] in ("arg", "buffer", "null_pointer"):
        return ptype.endswith(".ptr")
    dtype = "int32" if p["kind"] == "num_programs" else p["dtype"]
    return ptype in _SCALAR_PTX[dtype]


def _passed(p: dict[str, Any]) -> str:
    if p["kind"] in ("arg", "buffer", "null_pointer"):
        return "a pointer"
    return "int32" if p["kind"] == "num_programs" else p["dtype"]


def _python_names(launch: dict[str, Any], source: bytes | None) -> list[str]:
    """The plan's parameter names (the hidden trailing pointers aside) and constexprs in the
    order the generated kernel's `def` takes them, read from kernel_triton.py without running
    it."""
    if source is None:
        return [f"{TRITON_MODULE} is not listed in files"]
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as e:
        return [f"{TRITON_MODULE} does not parse ({e})"]
    defs = [f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == launch["kernel"]]
    if len(defs) != 1:
        return [f"{TRITON_MODULE} defines no kernel {launch['kernel']}"]
    want = [a.arg for a in defs[0].args.args]
    kinds = [p["kind"] for p in launch["params"]]
    hidden = kinds.count("null_pointer")
    if hidden and set(kinds[-hidden:]) != {"null_pointer"}:
        return ["its null pointers (Triton's hidden scratch parameters) are not its last ones"]
    got = [p["name"] for p in launch["params"] if p["kind"] != "null_pointer"]
    got += list(launch["constexprs"])
    if got != want:
        problem = (f"its parameters are ({', '.join(got)}), the generated kernel's are "
                   f"({', '.join(want)})")
        return [problem]
    return []
