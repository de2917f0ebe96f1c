"""The dataflow config's JSON Schema (shipped in the package) and validation against it."""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any

from tiledsl.errors import BackendError


@cache
def schema() -> dict[str, Any]:
    text = files("lowering.backends.spatial").joinpath("dataflow.schema.json").read_text()
    return json.loads(text)


def validate(config: dict[str, Any]) -> None:
    """Raise BackendError naming the first place where `config` breaks the schema."""
    import jsonschema

    errors = sorted(jsonschema.Draft202012Validator(schema()).iter_errors(config),
                    key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        where = "/".join(str(p) for p in e.absolute_path) or "<root>"
        raise BackendError(f"dataflow config does not match its schema at {where}: {e.message}")
