"""JSON-schema checks with one readable message: where the first violation is, and what it is."""

from __future__ import annotations

from typing import Any


def first_violation(schema: dict[str, Any], document: Any) -> str | None:
    """'at PATH: MESSAGE' for the first place (in path order) where `document` breaks `schema`,
    or None when it conforms."""
    import jsonschema

    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(document),
                    key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    e = errors[0]
    return f"at {'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
