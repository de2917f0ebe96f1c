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
    from tiledsl.schema_check import first_violation

    violation = first_violation(schema(), config)
    if violation:
        raise BackendError(f"dataflow config does not match its schema {violation}")
