"""Tile kernels tiledsl writes itself, from Python source it generates (a differentiable
kernel's backward, a Triton launch under `td.triton_launches()`): the source is registered with
`linecache` under a file name in angle brackets, so the tracer reads it as it reads a user's
function, and errors name that file and line."""

from __future__ import annotations

import linecache
from typing import Any


def kernel_from_source(make: type, name: str, source: str, file: str,
                       scope: dict[str, Any]) -> Any:
    """The tile kernel (`make`: TileKernel, passed in: its module imports this one's users) of
    function `name`, defined by `source` with globals `scope`."""
    linecache.cache[file] = (len(source), None, source.splitlines(True), file)
    exec(compile(source, file, "exec"), scope)
    return make(scope[name])
