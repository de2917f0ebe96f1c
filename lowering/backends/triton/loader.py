"""Generated modules are written to the cache directory and run from their source: Triton reads a
kernel's source with `inspect`, which finds it through linecache under the cached file's name.
The file is never trusted: it is compared with the source before use and rewritten if it
differs, and the code that runs is always the source itself."""

from __future__ import annotations

import hashlib
import linecache
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Iterator

from tiledsl.runtime.cache_files import ignored, read_entry, write_entry
from tiledsl.runtime.paths import cache_dir


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
    """Import the module with this source. It is written to the cache (by content hash) for
    people and tools to read, and executed from `source` itself: the file on disk is checked
    against its hash first and rewritten when it differs (edited, truncated, replaced), and
    Python and Triton read the lines through linecache, so they see `source` too."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:24]
    key = (digest, interpret)
    if key in _loaded:
        return _loaded[key]
    path = cache_dir() / "triton" / f"k_{digest}.py"
    _write_checked(path, source, digest)
    name = f"tiledsl_generated_{digest}_{'interp' if interpret else 'gpu'}"
    module = ModuleType(name)
    module.__file__ = str(path)
    # mtime None: linecache never rereads it from the file, which may change under us
    linecache.cache[str(path)] = (len(source), None, source.splitlines(True), str(path))
    sys.modules[name] = module
    with interpreting(interpret):
        exec(compile(source, str(path), "exec"), module.__dict__)
    _loaded[key] = module
    return module


def _write_checked(path: Path, source: str, digest: str) -> None:
    """Leave the cached module at `path` if it holds `source`, else (re)write it."""
    data = read_entry(path)
    if data == source.encode():
        return
    if data is not None:
        what = "empty" if not data else "not the source its name is the hash of"
        ignored(path, f"it is {what} (edited or truncated)")
    try:
        write_entry(path, source.encode())
    except OSError as e:  # the module still runs from `source`; only the readable copy is lost
        ignored(path, f"it cannot be written ({e.strerror or e})")
