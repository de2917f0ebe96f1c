"""Parse the IR text form written by `tiledsl.ir.printer` back into a `Function`."""

from __future__ import annotations

import json
import re
from typing import Any

from tiledsl import dtypes
from tiledsl.errors import IRError, Loc
from tiledsl.ir.core import Block, Function, Op, Symbol, Value
from tiledsl.ir.ops import OPS, result_types
from tiledsl.ir.types import Dim, RangeType, TensorType, TileType, Type

_TOKEN = re.compile(r"""
    (?P<ws>\s+|//[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<type>(?:tensor|tile|range)<[^>]*>)
  | (?P<value>%[A-Za-z0-9_]+)
  | (?P<func>@[A-Za-z_][A-Za-z0-9_]*)
  | (?P<number>-?(?:inf\b|nan\b|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<punct>[(){}\[\],:=])
""", re.VERBOSE)


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out, pos, line = [], 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise IRError(f"line {line}: cannot read {text[pos:pos + 20]!r}")
        kind = m.lastgroup or ""
        if kind != "ws":
            out.append((kind, m.group(), line))
        line += m.group().count("\n")
        pos = m.end()
    out.append(("eof", "", line))
    return out


def _dtype(text: str) -> dtypes.DType:
    d = dtypes.BY_SHORT.get(text)
    if d is None:
        raise IRError(f"unknown dtype {text!r}")
    return d


def _dim(text: str) -> Dim:
    return int(text) if text.isdigit() else text


def parse_type(text: str) -> Type:
    if "<" not in text:
        return TileType((), _dtype(text))
    kind, body = text[:-1].split("<", 1)
    parts = body.split("x")
    if kind == "range":
        block, *flags = parts[1].split(",")
        return RangeType(int(parts[0]), _dim(block), "stop" in flags, "shifted" in flags)
    dtype = _dtype(parts[-1])
    if kind == "tensor":
        return TensorType(tuple(int(p) for p in parts[:-1]), dtype)
    return TileType(tuple(_dim(p) for p in parts[:-1]), dtype)


class Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0
        self.values: dict[str, Value] = {}
        self.file = ""

    def peek(self, value: str | None = None, kind: str | None = None) -> bool:
        k, v, _ = self.toks[self.i]
        return (value is None or v == value) and (kind is None or k == kind)

    def next(self, value: str | None = None, kind: str | None = None) -> str:
        k, v, line = self.toks[self.i]
        if (value is not None and v != value) or (kind is not None and k != kind):
            raise IRError(f"line {line}: expected {value or kind}, found {v!r}")
        self.i += 1
        return v

    def error(self, msg: str) -> IRError:
        return IRError(f"line {self.toks[self.i][2]}: {msg}")

    def define(self, name: str, type: Type) -> Value:
        if name in self.values:
            raise self.error(f"{name} is defined twice")
        hint = name[1:]
        v = Value(type, None if hint.isdigit() else hint)
        self.values[name] = v
        return v

    def use(self, name: str) -> Value:
        if name not in self.values:
            raise self.error(f"{name} is used before it is defined")
        return self.values[name]

    def attr(self) -> Any:
        if self.peek("["):
            self.next("[")
            items = []
            while not self.peek("]"):
                items.append(self.attr())
                if not self.peek("]"):
                    self.next(",")
            self.next("]")
            return tuple(items)
        kind, text, _ = self.toks[self.i]
        self.i += 1
        if kind == "string":
            return json.loads(text)
        if kind == "number":
            if text.lstrip("-") in ("inf", "nan") or any(c in text for c in ".eE"):
                return float(text)
            return int(text)
        if kind == "ident" and text in ("true", "false", "none"):
            return {"true": True, "false": False, "none": None}[text]
        raise self.error(f"bad attribute value {text!r}")

    def loc(self) -> Loc | None:
        if not self.peek("loc"):
            return None
        self.next("loc")
        self.next("(")
        file = self.file
        if self.peek(kind="string"):
            file = json.loads(self.next(kind="string"))
            self.next(":")
        line = int(self.next(kind="number"))
        self.next(")")
        return Loc(file, line)

    def typed_values(self) -> list[Value]:
        self.next("(")
        out = []
        while not self.peek(")"):
            name = self.next(kind="value")
            self.next(":")
            out.append(self.define(name, self.type()))
            if not self.peek(")"):
                self.next(",")
        self.next(")")
        return out

    def type(self) -> Type:
        kind, text, _ = self.toks[self.i]
        if kind not in ("type", "ident"):
            raise self.error(f"expected a type, found {text!r}")
        self.i += 1
        try:
            return parse_type(text)
        except (IRError, ValueError, IndexError) as e:
            self.i -= 1
            raise self.error(f"bad type {text!r}: {getattr(e, 'message', e)}") from None

    def op(self) -> Op:
        results: list[str] = []
        if self.peek(kind="value"):
            results.append(self.next(kind="value"))
            while self.peek(","):
                self.next(",")
                results.append(self.next(kind="value"))
            self.next("=")
        name = self.next(kind="ident")
        if name not in OPS:
            raise self.error(f"unknown op '{name}'")
        operands = []
        if self.peek(kind="value"):
            operands.append(self.use(self.next(kind="value")))
            while self.peek(","):
                self.next(",")
                operands.append(self.use(self.next(kind="value")))
        attrs: dict[str, Any] = {}
        if self.peek("{"):
            self.next("{")
            while not self.peek("}"):
                key = self.next(kind="ident")
                self.next("=")
                attrs[key] = self.attr()
                if not self.peek("}"):
                    self.next(",")
            self.next("}")
        types: list[Type] = []
        if self.peek(":"):
            self.next(":")
            types.append(self.type())
            while self.peek(","):
                self.next(",")
                types.append(self.type())
        regions = []
        for _ in range(OPS[name].regions):
            args = self.typed_values()
            self.next("{")
            regions.append(Block(args, self.ops()))
            self.next("}")
        loc = self.loc()
        try:
            inferred = result_types(name, [o.type for o in operands], attrs, types)
        except IRError as e:
            raise self.error(e.message) from None
        if inferred != types:
            raise self.error(f"{name}: result types {types} do not match the rule's {inferred}")
        if len(results) != len(types):
            raise self.error(f"{name}: {len(results)} results named, {len(types)} typed")
        vals = [self.define(r, t) for r, t in zip(results, types)]
        return Op(name, operands, vals, attrs, regions, loc)

    def ops(self) -> list[Op]:
        out = []
        while not self.peek("}"):
            out.append(self.op())
        return out

    def function(self) -> Function:
        self.next("kernel")
        name = self.next(kind="func")[1:]
        args = self.typed_values()
        if self.peek("file"):
            self.next("file")
            self.file = json.loads(self.next(kind="string"))
        symbols: dict[str, Symbol] = {}
        if self.peek("symbols"):
            self.next("symbols")
            self.next("[")
            while not self.peek("]"):
                sym = self.next(kind="ident")
                self.next("=")
                extent = int(self.next(kind="number"))
                tied = None
                if self.peek("tied"):
                    self.next("tied")
                    self.next("(")
                    tied = self.next(kind="ident")
                    self.next(")")
                symbols[sym] = Symbol(sym, extent, self.loc(), tied=tied)
                if not self.peek("]"):
                    self.next(",")
            self.next("]")
        self.next("{")
        body = Block([], self.ops())
        self.next("}")
        self.next(kind="eof")
        return Function(name, args, body, symbols, self.file)


def parse_ir(text: str) -> Function:
    """Parse the text form of one kernel; raises IRError with the line of the first problem."""
    return Parser(text).function()
