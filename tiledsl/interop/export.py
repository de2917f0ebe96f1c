"""Write an ahead-of-time kernel package: `kernel.export(path, *example_args, arch="sm_90")`.

The package is a directory that `tiledsl.load` (tiledsl/interop/aot.py) runs with CuPy alone:

    manifest.json      what to allocate and launch, and what arguments the cubins take
    package.sha256     a digest over the manifest and every file, checked at load
    <kernel>.cubin     one per generated kernel, compiled for `arch` (with its .ptx beside it)
    kernel_triton.py   the generated Triton module, for people to read
    dataflow.json      the spatial dataflow config of the same kernel (when the mapper takes it)

The kernel is traced for the example arguments and compiled for exactly their shapes, dtypes and
strides (as every tiledsl compile is). The Triton backend provides the launch plan through the
registry, so this module, like the rest of the frontend, never imports the lowering packages.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiledsl.runtime import registry
from tiledsl.interop.aot import FORMAT, FORMAT_VERSION, MANIFEST, validate_manifest
from tiledsl.interop.package_check import DIGEST, package_digest
from tiledsl.runtime.config import Config, ConfigSpace
from tiledsl.errors import ArgumentError, TileDSLError
from tiledsl.version import __version__

if TYPE_CHECKING:
    from tiledsl.runtime.kernel import TileKernel

TMA_NOTE = ("tma=True was turned off: tensor descriptors are host objects that Triton's launcher "
            "builds, and a cubin launched without Triton cannot take them")


def export(kernel: TileKernel, path: str | Path, *example_args: Any, arch: str = "sm_90",
           config: Config | None = None, **example_kwargs: Any) -> Path:
    """Compile `kernel` for the example arguments' signature and `arch`, and write the package
    to directory `path` (replacing an earlier package there). The config is `config` if given,
    else the tuned one from the result cache, else the space's default. Returns the path."""
    if not isinstance(path, (str, os.PathLike)):
        raise ArgumentError(f"export(path, ...): the path is a directory name, got "
                            f"{type(path).__name__} {path!r}", kernel=kernel.name)
    try:
        return _export(kernel, Path(path), example_args, example_kwargs, arch, config)
    except TileDSLError as e:
        raise e.with_context(kernel=kernel.name) from None


def _export(kernel: TileKernel, root: Path, args: tuple, kwargs: dict[str, Any], arch: str,
            config: Config | None) -> Path:
    values = kernel.bind(args, kwargs)
    spec = kernel.arg_spec(values)
    names = list(kernel.signature.parameters)
    for j, s in enumerate(spec):
        if s[0] == "alias":  # a package takes each of its arrays: one passed twice is not one
            raise ArgumentError(f"arguments '{names[s[1]]}' and '{names[j]}' are one array: a "
                                "package is made for distinct arrays", kernel=kernel.name,
                                hint=f"export with a separate array for '{names[j]}'")
    space = kernel.space(spec, "triton")
    kernel.runner.check_no_overlap(kernel.specs.flat(spec, values), spec)  # its layout is the package's
    chosen, source = choose_config(kernel, values, spec, space, config)
    chosen, notes = launchable(chosen)
    traced = kernel.traces.for_config(spec, chosen).only_arguments("a package")  # (a knob's
    # value is a trace of its own)
    plan = registry.backend("triton").export_plan(  # type: ignore[attr-defined]
        traced.for_backend("triton"), chosen, kernel.specs.flat(spec, values), arch)
    _check_target(root)
    staging = root.parent / f".{root.name}.{os.getpid()}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        staging.mkdir(parents=True)
    except OSError as e:
        raise ArgumentError(f"cannot write the package to '{root}': {e.strerror or e}") from None
    try:
        for name, src in plan["files"].items():
            shutil.copyfile(src, staging / name)
        for name, text in plan["texts"].items():
            (staging / name).write_text(text)
        dataflow = _dataflow(kernel, args, kwargs, staging)
        part = plan["manifest"]
        written = set(kernel.traces.written(spec))  # so a call can refuse arguments that overlap them
        for a, name in zip(part["arguments"], kernel.specs.flat_names(spec)):
            if a["kind"] == "tensor":
                a["written"] = name in written
        manifest = {
            "format": FORMAT, "format_version": FORMAT_VERSION, "kernel": kernel.name,
            "source_file": kernel.file, "ir_hash": traced.hash, "tiledsl_version": _version(),
            "constants": {n: str(s[1]) for n, s in zip(kernel.signature.parameters, spec)
                          if s[0] in ("const", "closure")},
            "triton_version": part["triton_version"], "arch": arch, "config": chosen.to_dict(),
            "config_source": source, "notes": notes, "arguments": part["arguments"],
            "buffers": part["buffers"], "outputs": part["outputs"], "returns": traced.returns,
            "launches": part["launches"], "dataflow": dataflow,
            "files": {f.name: _sha256(f) for f in sorted(staging.iterdir())},
        }
        validate_manifest(manifest, f"the manifest of {kernel.name}")  # our own output, checked
        contents = {name: (staging / name).read_bytes() for name in manifest["files"]}
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        (staging / DIGEST).write_text(package_digest(manifest, contents) + "\n")
        if root.exists():
            shutil.rmtree(root)
        staging.replace(root)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return root


def choose_config(kernel: TileKernel, values: list[Any], spec: tuple, space: ConfigSpace,
                  config: Config | None) -> tuple[Config, str]:
    """The config to export and where it came from: "given", "tuned" (the result cache's best
    for backend "triton") or "default"."""
    if config is not None:
        return space.validate(config), "given"
    tuned = kernel.tuned_config(values, spec, "triton", None, space)
    if tuned is not None:
        return space.complete(tuned), "tuned"
    return space.default(), "default"


def launchable(config: Config) -> tuple[Config, list[str]]:
    """`config` with what a raw cubin launch cannot do turned off, and notes saying so."""
    if config.get("tma", False):
        return config.replace(tma=False), [TMA_NOTE]
    return config, []


def _check_target(root: Path) -> None:
    """Refuse to replace a directory that holds anything but an earlier package."""
    if not root.exists():
        return
    if not root.is_dir():
        raise ArgumentError(f"cannot export to {root}: it exists and is not a directory")
    if any(root.iterdir()) and not (root / MANIFEST).is_file():
        raise ArgumentError(f"cannot export to {root}: it is a non-empty directory that holds no "
                            "kernel package; choose a new or empty directory")


def _dataflow(kernel: TileKernel, args: tuple, kwargs: dict[str, Any],
              folder: Path) -> dict[str, str]:
    """Write dataflow.json for the default spatial arch; a kernel the mapper rejects gets the
    reason instead (the GPU package is still complete)."""
    try:
        text = kernel.source(*args, target="spatial", **kwargs)
    except TileDSLError as e:
        return {"error": f"{type(e).__name__}: {e.message}"}
    (folder / "dataflow.json").write_text(text + "\n")
    return {"file": "dataflow.json", "arch": str(json.loads(text).get("arch", ""))}


def _version() -> str:
    return __version__


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
