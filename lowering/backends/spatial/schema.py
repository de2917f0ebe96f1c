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
    """Raise BackendError naming the first place where `config` breaks the schema (checked
    against its form, one config or a sequence of phases, so the message names the place)."""
    from tiledsl.schema_check import first_violation

    form = "sequence" if isinstance(config, dict) and "phases" in config else "config"
    branch = {k: v for k, v in schema().items() if k != "oneOf"}
    violation = first_violation({**branch, "$ref": f"#/$defs/{form}"}, config)
    if violation:
        raise BackendError(f"dataflow config does not match its schema {violation}")
