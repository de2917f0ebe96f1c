"""Folding a loop's iteration bodies into `loop` steps, as DMA engines repeat buffer
descriptors: runs of iterations that differ only in their copies' offsets (affine in the
iteration, like AIE BDs) become one `loop` step with per-iteration offset strides."""

from __future__ import annotations

from typing import Any


def fold_loop(bodies: list[list[dict]]) -> list[dict]:
    """Consecutive identical iteration bodies (up to copy offsets) become one `loop` step."""
    out: list[dict] = []
    keys: dict[int, str] = {}  # bodies repeat as the same objects: one key each

    def key_of(body: list[dict]) -> str:
        if id(body) not in keys:
            keys[id(body)] = _shape_key(body)
        return keys[id(body)]

    i = 0
    while i < len(bodies):
        j = i + 1
        key = key_of(bodies[i])
        while j < len(bodies) and key_of(bodies[j]) == key:
            j += 1
        if not bodies[i]:
            pass  # nothing happens in these iterations (e.g. a PE fed by a neighbour's multicast)
        elif j - i == 1:
            out.extend(bodies[i])
        else:
            out.append({"loop": j - i, "body": bodies[i],
                        "offset_steps": _offset_steps(bodies[i], bodies[i + 1])})
        i = j
    return out


def _shape_key(body: list[dict]) -> str:
    """A body's steps with copy offsets and program positions blanked out."""
    def strip(step: dict) -> Any:
        if "copy" in step:
            c = step["copy"]
            return ("copy", c["bytes"], c.get("route"), tuple(sorted(c["dst"].items(), key=str)),
                    str(c["src"].get("sizes")), c.get("switch", False))
        if "op" in step:
            return ("op", step["op"]["cycles"], step["op"]["macs"])
        if "loop" in step:
            return ("loop", step["loop"], tuple(strip(s) for s in step["body"]))
        return tuple(sorted((k, str(v)) for k, v in step.items()))
    return repr([strip(s) for s in body])


def _offset_steps(first: list[dict], second: list[dict]) -> list[int]:
    """How each copy's offset advances per iteration (affine access patterns, like AIE BDs)."""
    out = []
    for a, b in zip(first, second):
        if "copy" in a:
            src_a = a["copy"]["src"].get("offset", a["copy"]["dst"].get("offset", 0))
            src_b = b["copy"]["src"].get("offset", b["copy"]["dst"].get("offset", 0))
            out.append(int(src_b - src_a))
    return out
