"""The name a kernel gives a tensor it allocates: `out` in `out = td.empty_like(x)`.

Errors name tensors (races.py, separation.py, values.py); an allocated tensor has no parameter
name, so its name is the variable the user's source assigns it to, read from the AST of the
file at the allocation's line; failing that (no source, `a, b = ...`, no assignment), what
allocated it and where (`<empty at line 6>`).
"""

from __future__ import annotations

import ast
import functools
import linecache

from tiledsl.errors import Loc


@functools.lru_cache(maxsize=64)
def _assigned(source: str) -> dict[int, str]:
    """line -> the one variable an assignment there binds (over all lines it spans)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    names: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target = node.target
        else:
            continue
        if isinstance(target, ast.Name):
            for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                names[line] = target.id
    return names


def tensor_name(loc: Loc | None, what: str) -> str:
    """The name of the tensor `td.<what>(...)` allocates at the user's line `loc`."""
    if loc is not None:
        name = _assigned("".join(linecache.getlines(loc.file))).get(loc.line)
        if name is not None:
            return name
    return f"<{what} at line {loc.line if loc is not None else '?'}>"
