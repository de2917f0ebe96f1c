"""A dataflow config's numbers checked against the architecture it claims to run on (after the
schema, which bounds only their types): every PE on the grid, every link between neighbours
and named once, every route no shorter than the distance it covers and no longer than its
links, its channel one the links have, every buffer inside its PE's SRAM, every copy no larger
than the SRAM buffer it fills or drains, every tensor addressable. A hand-edited config that
breaks one is a BackendError naming the field, not plausible cycles from impossible hardware."""

from __future__ import annotations

from typing import Any

from lowering.backends.spatial.arch import Arch
from tiledsl.dtypes import BY_SHORT
from tiledsl.errors import BackendError

MAX_TENSOR_BYTES = 2**62  # the simulator and the report count bytes in 64-bit integers
_STEP = {"N": (-1, 0), "S": (1, 0), "E": (0, 1), "W": (0, -1)}


def _fail(field: str, message: str) -> None:
    raise BackendError(f"dataflow config: {field}: {message}")


def check_bounds(config: dict[str, Any], arch: Arch) -> None:
    """Raise BackendError naming the first field of `config` (schema-valid, references
    resolved) that `arch` cannot hold."""
    grid = f"{arch.name}'s {arch.rows}x{arch.cols} grid of PEs"

    def pe(field: str, at: list[int]) -> tuple[int, int]:
        if not (0 <= at[0] < arch.rows and 0 <= at[1] < arch.cols):
            _fail(field, f"PE {list(at)} is outside {grid}")
        return at[0], at[1]

    for what in ("buffers", "semaphores", "agents"):
        for i, item in enumerate(config[what]):
            pe(f"{what}/{i}/pe", item["pe"])
    _check_links(config["links"], pe)
    attach = {d.name: d.attach for d in arch.dram}
    for i, route in enumerate(config["routes"]):
        ends = [(f"routes/{i}/src", route["src"])] + [
            (f"routes/{i}/dst/{j}", e) for j, e in enumerate(route["dst"])]
        at = [pe(f"{f}/pe", e["pe"]) if "pe" in e else attach[e["dram"]] for f, e in ends]
        _check_route(i, route, at, arch)
    _check_buffers(config["buffers"], arch)
    for i, tensor in enumerate(config["tensors"]):
        size = BY_SHORT[tensor["dtype"]].bits // 8 or 1
        for n in tensor["shape"]:
            size *= n
        if size > MAX_TENSOR_BYTES:
            _fail(f"tensors/{i}/shape", f"tensor {tensor['name']!r} of shape {tensor['shape']} "
                  f"has {size} bytes, more than the 2**62 the simulator counts")


def _check_links(links: list[dict[str, Any]], pe: Any) -> None:
    """Each link leaves a PE of the grid towards a neighbour on the grid, and is listed once."""
    seen: dict[tuple[int, int, str], int] = {}
    for i, link in enumerate(links):
        r, c = pe(f"links/{i}/from", link["from"])
        dr, dc = _STEP[link["dir"]]
        pe(f"links/{i}/dir", [r + dr, c + dc])
        key = (r, c, link["dir"])
        if key in seen:
            _fail(f"links/{i}", f"the link from PE {[r, c]} going {link['dir']} is also link "
                  f"{seen[key]}")
        seen[key] = i


def _check_route(i: int, route: dict[str, Any], at: list[tuple[int, int]], arch: Arch) -> None:
    """A route's hops: at least the distance from its source to its farthest destination (a
    DRAM channel sits at the PE it attaches to), at most its links (a hop crosses one). Its
    channel: one of the channels each link carries. Its links: each once."""
    links = route["links"]
    if len(set(links)) != len(links):
        _fail(f"routes/{i}/links", f"route {route['id']!r} lists a link twice: {links}")
    (r, c), far = at[0], 0
    for dr, dc in at[1:]:
        far = max(far, abs(dr - r) + abs(dc - c))
    if not far <= route["hops"] <= len(links):
        _fail(f"routes/{i}/hops", f"route {route['id']!r} has {route['hops']} hops over "
              f"{len(links)} links; its farthest destination is {far} hops away (a route has at "
              "least that many hops, and at most as many as links)")
    if route["channel"] >= arch.channels_per_link:
        _fail(f"routes/{i}/channel", f"route {route['id']!r} uses channel {route['channel']}; "
              f"{arch.name} has {arch.channels_per_link} channels per link")


def _check_buffers(buffers: list[dict[str, Any]], arch: Arch) -> None:
    """Every buffer (its slots: bytes x depth) lies inside its PE's SRAM, and so do all of a
    PE's buffers together."""
    used: dict[tuple[int, int], int] = {}
    for i, b in enumerate(buffers):
        size = b["bytes"] * b["depth"]
        if b["addr"] + size > arch.sram_bytes:
            _fail(f"buffers/{i}", f"buffer {b['id']!r} ({b['bytes']} bytes x depth {b['depth']} "
                  f"at address {b['addr']}) ends past the {arch.sram_bytes} bytes of SRAM a PE "
                  f"of {arch.name} has")
        key = (b["pe"][0], b["pe"][1])
        used[key] = used.get(key, 0) + size
        if used[key] > arch.sram_bytes:
            _fail(f"buffers/{i}", f"the buffers of PE {list(key)} need {used[key]} bytes up to "
                  f"buffer {b['id']!r}; a PE of {arch.name} has {arch.sram_bytes} bytes of SRAM")


def check_copy(field: str, copy: dict[str, Any], buffers: dict[str, dict[str, Any]]) -> None:
    """A copy moves at most what the SRAM buffer it fills or drains holds (one slot)."""
    sides = ([copy["src"]["buffer"]] if "buffer" in copy["src"] else []) + \
        list(copy["dst"].get("buffers", []))
    if not sides:
        _fail(field, "a copy must read or write an SRAM buffer ({'buffer': id} or "
              "{'buffers': [ids]}), not go from tensor to tensor")
    for b in sides:
        if copy["bytes"] > buffers[b]["bytes"]:
            _fail(f"{field}/bytes", f"the copy moves {copy['bytes']} bytes; buffer {b!r} holds "
                  f"{buffers[b]['bytes']}")
