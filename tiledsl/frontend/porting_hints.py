"""Hints for the errors an author porting a Triton or Helion kernel meets when writing its
spelling (`hl.tile(begin, end)`, `range()` over loaded bounds): the features stay refusals, and
the hint says what to write in tiledsl instead. Read from the user's source line where the
failing use is a Python builtin (as tiledsl/frontend/foreign_calls.py does)."""

from __future__ import annotations

import ast

from tiledsl.errors import Loc
from tiledsl.ir.types import UNBOUNDED

HELION_TILE = ("td.tile(a, b) is a 2-D tile (a by b), except with one loop variable and a "
               "runtime a (Helion's `for t in hl.tile(begin, end)`); Helion's "
               "hl.tile(begin, end) is td.tile(n, start=begin, stop=end), with n a static "
               "bound of end (td.tile(end, start=begin) when end is an int, td.tile(end) when "
               "begin is 0)")

RANGE = ("range() takes runtime bounds only as the iterable of a `for` statement in the "
         "kernel (`for i in range(lo, hi)`: each program loops to its own bound); elsewhere "
         "it needs Python ints")


def calls_range(loc: Loc | None) -> bool:
    """Whether the user's line at `loc` calls the builtin `range`."""
    if loc is None:
        return False
    line = loc.source_line()
    try:  # a compound statement's header (`for c in range(a, b):  # ...`) gets a body
        tree = ast.parse(line + "\n pass" if line.startswith(("for ", "while ", "if ", "with "))
                         else line)
    except SyntaxError:  # one line of a longer statement
        return False
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "range"
               for n in ast.walk(tree))


def tile_tuple(extents: list[object]) -> str:
    """The hint for a tensor indexed with a tuple of tiles (the item of a multi-size
    `td.tile`) in one position; with two tiles, the first the smaller, it may be Helion's
    `hl.tile(begin, end)` written as `td.tile(begin, end)`."""
    hint = ("a loop over td.tile(a, b) gives a tuple of tiles: unpack it "
            "(`for ta, tb in td.tile(a, b)`)")
    if len(extents) == 2 and all(isinstance(e, int) for e in extents) \
            and (extents[0] < extents[1] or extents[0] == UNBOUNDED):  # type: ignore[operator]
        hint += "; " + HELION_TILE  # (a runtime first size: `hl.tile(begin, end)`'s begin)
    return hint
