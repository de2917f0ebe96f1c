"""Early exits from tile loops: `continue`, and `return` from a grid loop's program.

Triton and CUDA kernels end a program early (`if row >= n: return`, Liger's `if y ==
ignore_index: ...; return`) and skip a loop's iteration (`if empty: continue`). tiledsl traces a
loop's body once, so an exit cannot leave it; instead it rewrites the body so that what follows
an exit is the other branch of its `if`:

    for r in td.grid(n):              for r in td.grid(n):
        a = ...                           a = ...
        if y[r] == ignore:                if y[r] == ignore:
            out[r, :] = 0                     out[r, :] = 0
            return            ->          else:
        out[r, :] = f(a)                      out[r, :] = f(a)

which is what the exit means: each program (or iteration) takes its branch. The statements after
an `if` that may exit are copied into both of its branches, each then folded again.

A loop is folded only when every exit is a `continue` of its own or a bare `return`, reached
through `if` statements alone (no `break`, no `return value`, no exit inside `with`/`try` or an
inner loop). Folding `continue` keeps its meaning over any iterable (so an unrolled Python loop
may `continue` on a runtime condition too, and so may a `while` loop); `return` leaves a Python
loop's kernel. Whether a `for` iterates tiles is known only while tracing, so a loop with a
`return` is folded into a copy, beside the original for Python iterables:

    _td_iter_7 = ITER
    if _td_rt.tiled(_td_iter_7):     # a Python bool: the rewrite keeps this `if` as it is
        for t in _td_iter_7: FOLDED BODY
    else:
        for t in _td_iter_7: ORIGINAL BODY

A function's own body is folded the same way when all its exits are bare `return`s through
`if`s: a helper the grid body calls, kept as the Triton kernel it was, may end early.

A `return` in a sequential tile loop is not folded: the grid loop around it holds a `return` in
a nested loop, which `tiledsl.frontend.loops.plain` refuses at the `return`'s line (it would end
the program midway through the loop, which a loop of fixed trip count cannot do).
"""

from __future__ import annotations

import ast
import copy

STATIC = "_td_static"  # set on the `if` above; the rewrite keeps it a plain Python `if`


def fold(fdef: ast.FunctionDef) -> None:
    """Rewrite every foldable `for` and `while` statement of `fdef` (not in nested functions) in
    place, and fold `fdef`'s own bare `return`s under `if`s when it returns nothing else: a
    helper the grid body calls, kept as the Triton kernel it was (vLLM's `if idx_seq >= batch:
    return` in `_causal_conv1d_update_kernel`), ends early as the grid body itself may."""
    counter = [0]
    _block(fdef.body, counter)
    if _exits(fdef.body):
        fdef.body = _fold(fdef.body)


def _block(stmts: list[ast.stmt], counter: list[int]) -> None:
    """Fold the loops in `stmts` and in the statements nested in them, innermost first."""
    out: list[ast.stmt] = []
    for stmt in stmts:
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for part in (getattr(stmt, "body", None), getattr(stmt, "orelse", None),
                         getattr(stmt, "finalbody", None),
                         *(h.body for h in getattr(stmt, "handlers", []))):
                if isinstance(part, list):
                    _block(part, counter)
        if isinstance(stmt, ast.For) and not stmt.orelse and _exits(stmt.body):
            if _first_return(stmt.body):
                counter[0] += 1
                out.extend(_dual(stmt, counter[0]))
                continue
            stmt.body = _fold(stmt.body)  # `continue` means the same over any iterable
        elif isinstance(stmt, ast.While) and not stmt.orelse and _exits(stmt.body) \
                and not _first_return(stmt.body):
            stmt.body = _fold(stmt.body)  # `continue`: the rest of the trip is skipped
        out.append(stmt)
    stmts[:] = out


def _is_exit(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Continue) or (isinstance(stmt, ast.Return) and stmt.value is None)


def _exits(stmts: list[ast.stmt]) -> bool | None:
    """True: `stmts` exit, only by bare `return`s and `continue`s reached through `if`s; False:
    they do not exit; None: they exit in a way `_fold` cannot remove."""
    found = False
    for stmt in stmts:
        if _is_exit(stmt):
            found = True
        elif isinstance(stmt, ast.If):
            parts = (_exits(stmt.body), _exits(stmt.orelse))
            if None in parts:
                return None
            found = found or any(parts)
        elif _escapes(stmt):
            return None
    return found


def _escapes(stmt: ast.stmt) -> bool:
    """Whether `stmt` (not an `if`) holds a `break` or `continue` of this loop, or a `return`."""
    todo: list[tuple[ast.AST, int]] = [(stmt, 0)]
    while todo:
        node, loops = todo.pop()
        if isinstance(node, ast.Return) or (loops == 0 and isinstance(node, (ast.Break,
                                                                              ast.Continue))):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        inner = loops + isinstance(node, (ast.For, ast.AsyncFor, ast.While))
        todo.extend((child, inner) for child in ast.iter_child_nodes(node))
    return False


def _fold(stmts: list[ast.stmt]) -> list[ast.stmt]:
    """`stmts` without exits: the statements after an exiting `if` join both its branches."""
    for i, stmt in enumerate(stmts):
        if _is_exit(stmt):
            return stmts[:i] or [ast.copy_location(ast.Pass(), stmt)]
        if isinstance(stmt, ast.If) and (_exits(stmt.body) or _exits(stmt.orelse)):
            rest = stmts[i + 1:]
            stmt.body = _fold(stmt.body + copy.deepcopy(rest))
            stmt.orelse = _fold(stmt.orelse + rest)
            if all(isinstance(s, ast.Pass) for s in stmt.body) and stmt.orelse:
                # `if c: continue` -> `if not c: rest` (the generated code has no empty branch)
                stmt.test = ast.copy_location(ast.UnaryOp(ast.Not(), stmt.test), stmt.test)
                stmt.body, stmt.orelse = stmt.orelse, []
            return stmts[:i + 1]
    return stmts


def _first_return(stmts: list[ast.stmt]) -> int:
    """The line of the first bare `return` of a foldable body (0: none)."""
    for stmt in stmts:
        if isinstance(stmt, ast.Return):
            return stmt.lineno
        if isinstance(stmt, ast.If) and (line := _first_return(stmt.body)
                                         or _first_return(stmt.orelse)):
            return line
    return 0


def _dual(loop: ast.For, k: int) -> list[ast.stmt]:
    """The loop folded, chosen while tracing when it iterates tiles, beside the original."""
    name = f"_td_iter_{k}"
    folded = copy.deepcopy(loop)
    folded.body = _fold(folded.body)
    bind = ast.Assign([ast.Name(name, ast.Store())], loop.iter)
    for version in (folded, loop):
        version.iter = ast.Name(name, ast.Load())
    test = ast.Call(ast.Attribute(ast.Name("_td_rt", ast.Load()), "tiled", ast.Load()),
                    [ast.Name(name, ast.Load())], [])
    choose = ast.If(test, [folded], [loop])
    setattr(choose, STATIC, True)
    out: list[ast.stmt] = [bind, choose]
    for node in out:
        ast.copy_location(node, loop)
    return [ast.fix_missing_locations(node) for node in out]
