"""A JSON Schema compiled to a Python predicate, for documents too large to check with
`jsonschema` (which interprets the schema anew at every node: a dataflow config of 80,000 steps
took 6-30 s). It gives `jsonschema`'s verdict for the subset of Draft 2020-12 that tiledsl's
schemas use, and refuses to compile a schema with any other keyword; it says only whether the
document conforms, so a caller asks `schema_check.first_violation` where it does not."""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], bool]

_ANNOTATIONS = {"$schema", "$id", "$defs", "title", "description"}


def _is_integer(x: Any) -> bool:  # as jsonschema: 3.0 is an integer, True is not
    if isinstance(x, bool):
        return False
    return x.is_integer() if isinstance(x, float) else isinstance(x, int)


def _is_number(x: Any) -> bool:
    t = type(x)
    return t is int or t is float or (isinstance(x, numbers.Number) and t is not bool)


_TYPES: dict[str, Check] = {
    "object": lambda x: isinstance(x, dict), "array": lambda x: isinstance(x, list),
    "string": lambda x: isinstance(x, str), "integer": _is_integer, "number": _is_number,
    "boolean": lambda x: isinstance(x, bool), "null": lambda x: x is None,
}


def _equal(a: Any, b: Any) -> bool:
    """JSON equality, as jsonschema's: True is not 1, [1] equals [1.0]."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def compile_schema(schema: dict[str, Any]) -> Check:
    """A predicate: whether a document conforms to `schema` (local `$ref`s only)."""
    table: dict[str, Check] = {}

    def ref(pointer: str) -> Check:
        if not pointer.startswith("#/"):
            raise ValueError(f"schema_fast: only local $refs are supported, got {pointer!r}")
        if pointer not in table:
            node: Any = schema
            for part in pointer[2:].split("/"):
                node = node[part]
            table[pointer] = _never  # a placeholder while its (possibly recursive) body compiles
            table[pointer] = build(node)
        return lambda x: table[pointer](x)

    def build(node: dict[str, Any]) -> Check:
        keys = sorted((k for k in node if k not in _ANNOTATIONS), key=_cost)  # cheap ones first
        if node.get("type") == "object":  # the common case in one closure
            keys = [k for k in keys if k not in _OBJECT]
            checks = [_object(node, build)]
        else:
            checks = []
        checks += [c for k in keys if (c := _keyword(k, node[k], node, build, ref)) is not None]
        return _all(checks)

    return build(schema)


_CHEAP = ("type", "const", "enum", "required")


def _cost(key: str) -> int:
    return _CHEAP.index(key) if key in _CHEAP else len(_CHEAP)


def _all(checks: list[Check]) -> Check:
    if len(checks) == 1:
        return checks[0]

    def check(x: Any) -> bool:
        for c in checks:
            if not c(x):
                return False
        return True
    return check


def _never(x: Any) -> bool:
    raise AssertionError("schema_fast: a $ref was used before it compiled")


def _keyword(key: str, value: Any, node: dict[str, Any], build: Callable[[Any], Check],
             ref: Callable[[str], Check]) -> Check | None:
    """The check of one keyword (None where another keyword of the node does the work)."""
    if key == "$ref":
        return ref(value)
    if key == "type":
        kinds = [_TYPES[t] for t in ([value] if isinstance(value, str) else value)]
        return kinds[0] if len(kinds) == 1 else lambda x: any(k(x) for k in kinds)
    if key == "enum":
        return lambda x: any(_equal(x, v) for v in value)
    if key == "const":
        return lambda x: _equal(x, value)
    if key in ("minimum", "maximum"):
        below = key == "minimum"
        return lambda x: not _is_number(x) or (x >= value if below else x <= value)
    if key in ("minItems", "maxItems"):
        least = key == "minItems"
        return lambda x: not isinstance(x, list) or (len(x) >= value if least else
                                                     len(x) <= value)
    if key == "pattern":
        pattern = re.compile(value)
        return lambda x: not isinstance(x, str) or pattern.search(x) is not None
    if key == "items":
        return _items(build(value))
    if key == "required":
        needed = frozenset(value)
        return lambda x: not isinstance(x, dict) or needed <= x.keys()
    if key in ("oneOf", "anyOf"):
        return _alternatives([build(v) for v in value], exactly_one=key == "oneOf")
    if key == "properties":
        return _properties(value, node.get("additionalProperties", True), build)
    if key == "additionalProperties":
        return _properties({}, value, build) if "properties" not in node else None
    raise ValueError(f"schema_fast: the keyword {key!r} is not supported")


def _items(item: Check) -> Check:
    def check(x: Any) -> bool:
        if isinstance(x, list):
            for v in x:
                if not item(v):
                    return False
        return True
    return check


def _alternatives(forms: list[Check], exactly_one: bool) -> Check:
    def check(x: Any) -> bool:
        found = 0
        for f in forms:
            if f(x):
                if not exactly_one:
                    return True
                found += 1
                if found > 1:
                    return False
        return found == 1
    return check


_OBJECT = ("type", "required", "properties", "additionalProperties")


def _object(node: dict[str, Any], build: Callable[[Any], Check]) -> Check:
    """`type: object` with its `required`, `properties` and `additionalProperties`."""
    needed = frozenset(node.get("required", ()))
    members = _properties(node.get("properties", {}), node.get("additionalProperties", True),
                          build)
    return lambda x: isinstance(x, dict) and needed <= x.keys() and members(x)


def _properties(properties: dict[str, Any], additional: Any,
                build: Callable[[Any], Check]) -> Check:
    known = {k: build(v) for k, v in properties.items()}
    extra: Check | None = None if additional is True else (
        _reject if additional is False else build(additional))

    def check(x: Any) -> bool:
        if not isinstance(x, dict):
            return True
        for k, v in x.items():
            c = known.get(k, extra)
            if c is not None and not c(v):
                return False
        return True
    return check


def _reject(x: Any) -> bool:
    return False
