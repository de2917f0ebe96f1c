"""JSON-schema checks with one readable message: where the first violation is, and what it is."""

from __future__ import annotations

from typing import Any


def first_violation(schema: dict[str, Any], document: Any) -> str | None:
    """'at PATH: MESSAGE' for the first place (in path order) where `document` breaks `schema`,
    or None when it conforms. Where the place may be one of several forms (oneOf, anyOf), the
    message is that of the form the document got furthest into: `cycles: -1 is less than the
    minimum of 0` rather than `{...} is not valid under any of the given schemas`."""
    import jsonschema

    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(document), key=_place)
    if not errors:
        return None
    e = _closest_form(errors[0])
    return f"at {'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"


def _place(e: Any) -> list[str]:
    return [str(p) for p in e.absolute_path]


def _closest_form(e: Any) -> Any:
    """For an error of alternatives, the first error of the alternative whose errors lie
    deepest in the document (the form it was meant to have), recursively; the error itself
    when no alternative got past its top level."""
    while e.validator in ("oneOf", "anyOf") and e.context:
        forms: dict[Any, list[Any]] = {}
        for sub in e.context:
            forms.setdefault(sub.schema_path[0], []).append(sub)
        depth = {k: min(len(s.absolute_path) for s in errs) for k, errs in forms.items()}
        best = max(depth, key=depth.__getitem__)
        if depth[best] <= len(e.absolute_path):  # no form got further than its first key
            break
        e = min(forms[best], key=_place)
    return e
