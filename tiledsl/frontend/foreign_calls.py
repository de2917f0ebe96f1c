"""A Triton function called in a kernel body (`libdevice.asinh(x[t])`, `tl.exp(v)`): tiledsl
traces the body as Python, where such a function is a stub that returns None (libdevice) or
raises about `@triton.jit` (`tl.*`). The errors that follow name the call instead: read from
the user's source line, its callee resolved in the frame that runs it.
"""

from __future__ import annotations

import ast
import linecache
import os
import sys
from collections.abc import Iterable, Iterator
from types import FrameType, ModuleType
from typing import Any

from tiledsl.frontend.td_names import FUNCTIONS
from tiledsl.errors import Loc, is_internal

# td's elementwise math, as the README lists it (tests check that each exists)
MATH = ("abs", "exp", "exp2", "log", "log2", "log1p", "expm1", "sqrt", "rsqrt", "tanh",
        "sigmoid", "erf", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh",
        "pow", "floor", "ceil", "round", "trunc", "fma", "isnan", "isinf", "isfinite", "sign",
        "clamp", "asinh", "acosh", "atanh", "log10", "cbrt", "hypot", "copysign", "fmod",
        "maximum", "minimum", "where", "relu", "silu")
HINT = ("tiledsl's math functions are " + ", ".join(f"td.{n}" for n in MATH)
        + " (each lowers to tl.* or libdevice on Triton); compose others from them")


def _dotted(node: ast.AST) -> list[str] | None:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute) and (head := _dotted(node.value)) is not None:
        return [*head, node.attr]
    return None


def _resolve(parts: list[str], frame: FrameType) -> Any:
    scopes = (frame.f_locals, frame.f_globals, frame.f_builtins)
    obj = next((s[parts[0]] for s in scopes if parts[0] in s), None)
    for p in parts[1:]:  # through modules only: an attribute of a value could emit an op
        obj = getattr(obj, p, None) if isinstance(obj, ModuleType) else None
    return obj


def _is_triton(obj: Any) -> bool:
    if obj is None or isinstance(obj, ModuleType):
        return False
    module = getattr(obj, "__module__", None) or getattr(getattr(obj, "fn", None), "__module__", "")
    return isinstance(module, str) and (module == "triton" or module.startswith("triton."))


def triton_call(frame: FrameType, lineno: int) -> str | None:
    """The name of a Triton function called on line `lineno` of `frame` (`libdevice.asinh`)."""
    line = linecache.getline(frame.f_code.co_filename, lineno).strip()
    try:
        tree = ast.parse(line)
    except SyntaxError:  # a statement's header (`if f(v):  # ...`) gets a body to parse
        try:
            tree = ast.parse(line + "\n pass")
        except SyntaxError:  # one line of a longer statement
            return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (parts := _dotted(node.func)) is not None \
                and _is_triton(_resolve(parts, frame)):
            return ".".join(parts)
    return None


def triton_call_in(frames: Iterable[tuple[FrameType, int]], whole: bool = False
                   ) -> tuple[str, Loc] | None:
    """A Triton call on the line of the innermost frame of the user's code among `frames`
    ((frame, line), innermost first), and where it is; with `whole` (a None met, which a
    libdevice call may have returned lines before), on any line of that frame's code. Outer
    frames are not searched: host code may call `triton.cdiv` on the line of the grid loop
    whose body failed for another reason."""
    for f, lineno in frames:
        name = f.f_code.co_filename
        if is_internal(name) or f"{os.sep}triton{os.sep}" in name:
            continue
        lines = [lineno]
        if whole:
            lines += sorted({n for *_, n in f.f_code.co_lines() if n is not None} - {lineno})
        for n in lines:
            if (call := triton_call(f, n)) is not None:
                return call, Loc(name, n)
        return None
    return None


def caller_frames() -> Iterator[tuple[FrameType, int]]:
    """The frames that called this function's caller, innermost first."""
    f: FrameType | None = sys._getframe(2)
    while f is not None:
        yield f, f.f_lineno
        f = f.f_back


def traceback_frames(e: BaseException) -> list[tuple[FrameType, int]]:
    """The frames an exception passed through, innermost first."""
    out = []
    tb = e.__traceback__
    while tb is not None:
        out.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    return out[::-1]


def message(name: str) -> str:
    return (f"{name} is a Triton function: Triton functions cannot be called in a tiledsl "
            "kernel (its body runs as Python while it traces)")


def hint(name: str) -> str:
    """`td.<f>` where tiledsl has the function a Triton call names (`libdevice.asin`,
    `tl.math.exp2`), else the list of the math functions."""
    last = name.rsplit(".", 1)[-1]
    if last in FUNCTIONS:
        return f"write td.{last}(...): it lowers to the Triton function on that backend"
    return HINT
