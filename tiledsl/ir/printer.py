"""The IR's text form (parsed back by `tiledsl.ir.parser`) and its stable content hash.

    kernel @matmul(%a: tensor<300x200xf32>, %b: tensor<200x100xf32>) file "mm.py" symbols [B0 = 300 loc(7)] {
      %out = tensor.empty : tensor<300x100xf32> loc(6)
      grid (%tm: range<300xB0>, %tn: range<100xB1>) {
        %0 = load %a, %tm, %tk : tile<B0xB2xf32> loc(10)
        ...
      } loc(7)
      return %out
    }
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

from tiledsl.errors import Loc
from tiledsl.ir.core import Block, Function, Op, Value

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def format_attr(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(format_attr(x) for x in v) + "]"
    raise TypeError(f"attribute value {v!r} has no text form")


class Printer:
    def __init__(self, fn: Function, *, locs: bool, hints: bool) -> None:
        self.fn = fn
        self.locs = locs
        self.hints = hints
        self.names: dict[Value, str] = {}
        self.used: set[str] = set()
        self.counter = 0
        self.lines: list[str] = []

    def name(self, v: Value) -> str:
        if v in self.names:
            return self.names[v]
        base = v.hint if self.hints and v.hint and _IDENT.match(v.hint) and not v.hint.isdigit() else None
        if base is None:
            while str(self.counter) in self.used:
                self.counter += 1
            text = str(self.counter)
            self.counter += 1
        else:
            text, i = base, 1
            while text in self.used:
                text = f"{base}_{i}"
                i += 1
        self.used.add(text)
        self.names[v] = "%" + text
        return self.names[v]

    def loc(self, loc: Loc | None) -> str:
        if not self.locs or loc is None:
            return ""
        if loc.file == self.fn.file:
            return f" loc({loc.line})"
        return f" loc({json.dumps(loc.file)}:{loc.line})"

    def op(self, op: Op, indent: str) -> None:
        text = indent
        if op.results:
            text += ", ".join(self.name(r) for r in op.results) + " = "
        text += op.name
        if op.operands:
            text += " " + ", ".join(self.name(o) for o in op.operands)
        if op.attrs:
            text += " {" + ", ".join(f"{k} = {format_attr(op.attrs[k])}" for k in sorted(op.attrs)) + "}"
        if op.results:
            text += " : " + ", ".join(str(r.type) for r in op.results)
        if not op.regions:
            self.lines.append(text + self.loc(op.loc))
            return
        for region in op.regions:
            args = ", ".join(f"{self.name(a)}: {a.type}" for a in region.args)
            self.lines.append(f"{text} ({args}) {{")
            self.block(region, indent + "  ")
            text = indent + "}"
        self.lines.append(text + self.loc(op.loc))

    def block(self, block: Block, indent: str) -> None:
        for op in block.ops:
            self.op(op, indent)

    def function(self) -> str:
        fn = self.fn
        args = ", ".join(f"{self.name(a)}: {a.type}" for a in fn.args)
        head = f"kernel @{fn.name}({args})"
        if self.locs and fn.file:
            head += f" file {json.dumps(fn.file)}"
        if fn.symbols:
            syms = ", ".join(f"{s.name} = {s.extent}{f' tied({s.tied})' if s.tied else ''}"
                             f"{self.loc(s.loc)}" for s in fn.symbols.values())
            head += f" symbols [{syms}]"
        self.lines.append(head + " {")
        self.block(fn.body, "  ")
        self.lines.append("}")
        return "\n".join(self.lines) + "\n"


def print_ir(fn: Function, *, locs: bool = True, hints: bool = True) -> str:
    """The text form of `fn`. `locs=False, hints=False` gives the canonical form."""
    return Printer(fn, locs=locs, hints=hints).function()


def canonical(fn: Function) -> str:
    """Text that is equal for two IRs exactly when they are equal up to value names."""
    return print_ir(fn, locs=True, hints=False)


def ir_hash(fn: Function) -> str:
    """A stable content hash: ignores value names and source locations (a moved line hits)."""
    return hashlib.sha256(print_ir(fn, locs=False, hints=False).encode()).hexdigest()[:32]
