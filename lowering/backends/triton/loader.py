"""Generated modules are written to a cache directory and imported from there: Triton reads a
kernel's source with `inspect`, so `exec`'d code will not do."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from contextlib import contextmanager
from types import ModuleType
from typing import Iterator

from tiledsl.paths import cache_dir


# Triton 3.9 warns until this default is chosen explicitly; keep its current default (fused
# multiply-adds on), which the AOT compiler also passes as an option.
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")


@contextmanager
def interpreting(on: bool) -> Iterator[None]:
    """`@triton.jit` picks the interpreter when the decorator runs, from TRITON_INTERPRET.

    triton.language (and its lazily imported parts) must be imported with the variable as the
    user set it, or Triton's own library functions end up in the wrong mode."""
    import triton.language  # noqa: F401
    from triton.runtime.jit import mangle_type

    mangle_type(0)  # imports the rest of Triton's lazily loaded modules now
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1" if on else "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = old


_loaded: dict[tuple[str, bool], ModuleType] = {}


def load(source: str, *, interpret: bool) -> ModuleType:
    """Import the module with this source (written once to the cache, by content hash)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    key = (digest, interpret)
    if key in _loaded:
        return _loaded[key]
    path = cache_dir() / "triton" / f"k_{digest}.py"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(source)
        tmp.replace(path)  # atomic: concurrent writers of the same content agree
    name = f"tiledsl_generated_{digest}_{'interp' if interpret else 'gpu'}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    with interpreting(interpret):
        spec.loader.exec_module(module)
    _loaded[key] = module
    return module
