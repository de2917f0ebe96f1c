"""Which unannotated kernel parameters are tensors and which numbers, read from how the kernel's
source uses them: `td.torch_op` needs each parameter's kind for the op's schema before any call.

* A tensor: the body indexes it (`x[tm, :]`, `x[tm] = ...`), reads `x.shape` (or `.load`,
  `.store`, `.size`), or passes it first to `td.load`, `td.store`, `td.empty_like` or an atomic.
* A number: the body computes with it, as an operand of an arithmetic, comparison or boolean
  operator (`ms + eps`, `r > p`), an index (`x[tm, :k]`), a condition (`if causal:`) or an
  argument of a td math function, `td.tile`, `td.empty`, `range`, `int` or `float`. The kernel
  could not trace otherwise: a tensor must be indexed before computing with it.

A parameter used both ways, or neither way in the kernel's own body (passed only to a helper
function, or unused), has no kind: the caller asks for an annotation.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

_TENSOR_ATTRS = {"shape", "load", "store", "size", "numel"}
_TENSOR_FIRST = {"load", "store", "empty_like", "zeros_like", "ones_like", "full_like",
                 "atomic_add", "atomic_cas", "atomic_max", "atomic_min", "atomic_xchg"}
# td functions whose every argument is a value (a tensor argument would be a TraceError)
_NUMBER_ARGS = {"abs", "acos", "asin", "atan", "atan2", "cdiv", "ceil", "clamp", "cos", "cosh",
                "empty", "erf", "exp", "exp2", "expm1", "floor", "fma", "full", "isinf",
                "isnan", "log", "log1p", "log2", "maximum", "minimum", "philox", "pow", "rand",
                "rand4x", "randint", "randint4x", "randn", "randn4x", "relu", "round",
                "rsqrt", "sigmoid", "sign", "silu", "sin", "sinh", "sqrt", "tan", "tanh", "tile",
                "trunc", "zeros", "asinh", "acosh", "atanh", "log10", "cbrt", "hypot",
                "copysign", "fmod", "arange"}  # (not `where`: it chooses between tensors too)
_IDENTITY = (ast.Is, ast.IsNot, ast.In, ast.NotIn)  # `bias is None` says nothing


@dataclass
class Uses:
    """Where the body uses a parameter as a tensor and where as a number (source lines)."""
    tensor: list[int] = field(default_factory=list)
    number: list[int] = field(default_factory=list)


def parameter_uses(source: str, params: list[str], globals_: dict[str, Any]) -> dict[str, Uses]:
    """Each parameter's uses in the kernel function `source` (line numbers relative to it, 1 the
    `def` or its first decorator); `globals_` resolves `td.` (the module's name for tiledsl).
    A local bound to a parameter or to a view of it (`flat = x.reshape(-1)`) counts as it."""
    fn = ast.parse(textwrap.dedent(source)).body[0]
    uses = {p: Uses() for p in params}
    aliases = _aliases(fn, params)

    def td_function(func: ast.AST) -> str | None:
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            module = globals_.get(func.value.id)
            if isinstance(module, ModuleType) and module.__name__ == "tiledsl":
                return func.attr
        return None

    for node in ast.walk(fn):
        tensor, number = _evidence(node, td_function)
        for exprs, kind in ((tensor, "tensor"), (_flat(number), "number")):
            for n in exprs:
                if isinstance(n, ast.Name):
                    for p in aliases.get(n.id, ()):
                        getattr(uses[p], kind).append(n.lineno)
    return uses


def _evidence(node: ast.AST, td_function: Any) -> tuple[list[ast.AST], list[ast.AST]]:
    """The expressions `node` uses as a tensor and those it uses as numbers."""
    if isinstance(node, ast.Subscript):  # x[...]: a tensor; the names in its index: numbers
        return [node.value], [node.slice]
    if isinstance(node, ast.Attribute) and node.attr in _TENSOR_ATTRS:
        return [node.value], []
    if isinstance(node, ast.BinOp):
        return [], [node.left, node.right]
    if isinstance(node, ast.UnaryOp):
        return [], [node.operand]
    if isinstance(node, ast.AugAssign):
        return [], [node.value]
    if isinstance(node, ast.BoolOp):
        return [], list(node.values)
    if isinstance(node, (ast.If, ast.While, ast.IfExp)):  # a tensor has no truth value
        return [], [node.test]
    if isinstance(node, ast.Compare) and not any(isinstance(o, _IDENTITY) for o in node.ops):
        return [], [node.left, *node.comparators]
    if isinstance(node, ast.Call):
        name = td_function(node.func)
        if name in _TENSOR_FIRST and node.args:
            return [node.args[0]], []
        if name in _NUMBER_ARGS or isinstance(node.func, ast.Name) and \
                node.func.id in ("range", "int", "float", "bool"):
            return [], [*node.args, *(k.value for k in node.keywords)]
    return [], []


def _flat(nodes: list[ast.AST]) -> list[ast.AST]:
    """The expressions themselves and the items of tuples, lists and slices among them."""
    out: list[ast.AST] = []
    for n in nodes:
        if isinstance(n, (ast.Tuple, ast.List)):
            out += _flat(list(n.elts))
        elif isinstance(n, ast.Slice):
            out += _flat([p for p in (n.lower, n.upper, n.step) if p is not None])
        else:
            out.append(n)
    return out


def _aliases(fn: ast.AST, params: list[str]) -> dict[str, set[str]]:
    """Local name -> the parameters it may stand for: each parameter itself, and the locals
    assigned a parameter or a method's result on one (`flat = x.reshape(-1)`, `src = x`)."""
    aliases = {p: {p} for p in params}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name) and node.targets[0].id not in params:
            v = node.value
            if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute):
                v = v.func.value  # x.reshape(-1) stands for x
            if isinstance(v, ast.Name) and v.id in aliases:
                aliases.setdefault(node.targets[0].id, set()).update(aliases[v.id])
    return aliases
