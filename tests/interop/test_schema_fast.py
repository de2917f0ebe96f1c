"""tiledsl.interop.schema_fast: the compiled schema gives jsonschema's verdict (the dataflow config's
check trusts it for configs of tens of thousands of steps), at its corner cases."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from tiledsl.interop.schema_fast import compile_schema

_OBJ = {"type": "object", "required": ["a"], "additionalProperties": False,
        "properties": {"a": {"type": "array", "items": {"type": "integer"}, "maxItems": 2}}}
_TREE = {"$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}}, "$ref": "#/$defs/t"}
_ONE = {"oneOf": [{"type": "integer"}, {"minimum": 0}]}


@pytest.mark.parametrize("schema, document", [
    ({"type": "integer"}, 3.0), ({"type": "integer"}, 3.5), ({"type": "integer"}, True),
    ({"type": "number"}, True), ({"type": "number"}, 10**400), ({"type": "array"}, (1, 2)),
    ({"type": ["string", "null"]}, None), ({"const": 1}, True), ({"const": 1}, 1.0),
    ({"enum": ["a", "b"]}, "b"), ({"enum": [0]}, False), ({"minimum": 0}, "x"),
    ({"maximum": 1.7976931348623157e308}, 10**400), ({"minItems": 1}, []),
    ({"pattern": "^[0-9a-f]{2}$"}, "0g"), ({"pattern": "^[0-9a-f]{2}$"}, 12),
    (_OBJ, {"a": [1, 2]}), (_OBJ, {"a": [1, 2, 3]}), (_OBJ, {"a": [1], "b": 0}), (_OBJ, {}),
    (_OBJ, [1]), (_ONE, 5), (_ONE, -5), (_ONE, 0.5), (_TREE, [[[]], [[], [[]]]]), (_TREE, [[1]]),
])
def test_the_compiled_schema_agrees_with_jsonschema(schema: dict, document: Any) -> None:
    expected = jsonschema.Draft202012Validator(schema).is_valid(document)
    assert compile_schema(schema)(document) == expected


def test_a_keyword_it_does_not_know_is_refused_not_ignored() -> None:
    with pytest.raises(ValueError, match="'format' is not supported"):
        compile_schema({"type": "string", "format": "email"})
