"""Which names a kernel's loops rebind that the code after the loop may read.

A grid loop's body runs once per program, so a name it rebinds is a local of each program (as
in Triton, where `eps = eps.to(x.dtype)` in a kernel is plain code): no value flows out. That
is only an error when code after the loop reads the name, expecting the loop's value. This
module finds, before the loop rewrite, for each `for` statement of the kernel, the names its
body binds that may be read after it, each with the line of its first binding in the body.

"May be read after" is a backward liveness over the statement lists around the loop: a simple
statement kills the names it binds and reads the names it loads; an `if` reads its test and
what either branch reads first, a loop its iterable or test, what its body reads first and
what follows it (it may run no trip), a `with` what its body reads first; any other compound
statement (`try`, a nested function) reads every name it loads and kills none. At the end of
a loop's body the names its next iteration reads before binding them are live too (a fixed
point over the body), and any name a nested function or lambda of the kernel loads may be
read at any time.
"""

from __future__ import annotations

import ast

_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try,
             ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Match)
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def read_after(fdef: ast.FunctionDef
               ) -> tuple[dict[int, dict[str, int]], dict[int, tuple[set[str], set[str]]]]:
    """For each `for` statement of `fdef` (not in nested functions), by `id(for node)`: {name
    the loop's body binds that may be read after it: the line of the body's first binding of
    it}; and two sets of the names its body binds that nothing reads after the loop: those no
    trip reads before binding them, each trip's own (prefix_prefill's `k = tl.load(...)`
    beside the wrapper's tensor `k`), which a loop need not carry; and those a trip may read
    before binding them, as far as the code shows (a binding under an `if`, whose test may be
    known only while tracing: vLLM's `if not TIE_HDIM: dt = tl.load(...)`)."""
    closures: set[str] = set()
    for node in ast.walk(fdef):
        if isinstance(node, _NESTED) and node is not fdef:
            closures |= _loads(node)
    out: dict[int, dict[str, int]] = {}
    local: dict[int, set[str]] = {}
    _block(fdef.body, closures, closures, out, local)
    _narrow_maybe(fdef.body, closures, local)
    return out, local


def _narrow_maybe(stmts: list[ast.stmt], outside: set[str],
                  local: dict[int, tuple[set[str], set[str]]],
                  body: list[ast.stmt] | None = None) -> None:
    """Keep in each loop's second set only the names nothing outside the loop reads after it
    may have run: not the statements after it, at every level, nor the rest of the body of a
    loop around it (`body`, whose next trip comes after it), nor a closure (`outside`)."""
    for i, stmt in enumerate(stmts):
        around = outside | set().union(*(_loads(s) for s in stmts[i + 1:]))
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            if body is not None:
                around = around | _loads_except(body, stmt)
            if id(stmt) in local:
                sure, maybe = local[id(stmt)]
                local[id(stmt)] = (sure, maybe - around)
            _narrow_maybe(stmt.body, around | _loads_outside(stmt), local, stmt.body)
        elif isinstance(stmt, (ast.If, ast.With, ast.AsyncWith, ast.Try)):
            for part in (getattr(stmt, "body", []), getattr(stmt, "orelse", []),
                         getattr(stmt, "finalbody", []),
                         *(h.body for h in getattr(stmt, "handlers", []))):
                _narrow_maybe(part, around, local, body)


def _loads_except(stmts: list[ast.stmt], skip: ast.AST) -> set[str]:
    """The names `stmts` read outside the subtree of `skip`."""
    out: set[str] = set()
    todo: list[ast.AST] = list(stmts)
    while todo:
        node = todo.pop()
        if node is skip:
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            out.add(node.id)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
        todo.extend(ast.iter_child_nodes(node))
    return out


def _loads_outside(loop: ast.For | ast.AsyncFor | ast.While) -> set[str]:
    """What a loop reads outside its body: its iterable or test (each trip's too)."""
    return _loads(loop.iter) if isinstance(loop, (ast.For, ast.AsyncFor)) else _loads(loop.test)


def _block(stmts: list[ast.stmt], live_out: set[str], closures: set[str],
           out: dict[int, dict[str, int]], local: dict[int, tuple[set[str], set[str]]]
           ) -> set[str]:
    """The names live before `stmts`, given those live after; records each loop's entry."""
    live = set(live_out)
    for stmt in reversed(stmts):
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            inner = _loop_live(stmt, live, closures, out, local)
            start = _block(stmt.body, inner, closures, out, local)
            after = _block(stmt.orelse, live, closures, out, local)  # (no trip: the else)
            if isinstance(stmt, ast.For):
                stores = _first_stores([stmt.target, *stmt.body])
                out[id(stmt)] = {n: line for n, line in stores.items() if n in live}
                local[id(stmt)] = ({n for n in stores if n not in inner},
                                   {n for n in stores if n in inner})  # (narrowed below)
                head = _loads(stmt.iter)
                start = start - set(_first_stores([stmt.target]))
            else:
                head = _loads(stmt.test)
            live = head | start | after
        elif isinstance(stmt, ast.If):
            live = _loads(stmt.test) | _block(stmt.body, live, closures, out, local) | \
                _block(stmt.orelse, live, closures, out, local)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            live = _loads(stmt) | _block(stmt.body, live, closures, out, local)
        elif isinstance(stmt, ast.Try):
            every = live | _loads(stmt)
            for part in (stmt.body, stmt.orelse, stmt.finalbody,
                         *(h.body for h in stmt.handlers)):
                _block(part, every, closures, out, local)
            live = every
        elif isinstance(stmt, _COMPOUND):
            live |= _loads(stmt)
        else:
            live = (live - set(_first_stores([stmt]))) | _loads(stmt)
    return live


def _loop_live(stmt: ast.For | ast.AsyncFor | ast.While, live: set[str], closures: set[str],
               out: dict[int, dict[str, int]], local: dict[int, tuple[set[str], set[str]]]
               ) -> set[str]:
    """The names live at the end of a loop's body: those live after the loop, and those the
    next iteration reads before it binds them (its test, then its body after its target), to
    a fixed point. A name the body binds before it reads it again (the host wrapper's
    `dim_size_in = ...` ahead of the kernel's) is not live there."""
    head = _loads(stmt.test) if isinstance(stmt, ast.While) else set()
    bound = set() if isinstance(stmt, ast.While) else set(_first_stores([stmt.target]))
    inner = live | head | closures
    for _ in range(len(_loads(stmt)) + 2):  # each pass adds names, from a finite set
        start = _block(stmt.body, inner, closures, out, local)
        grown = inner | (start - bound)
        if grown == inner:
            break
        inner = grown
    return inner


def _loads(node: ast.AST) -> set[str]:
    """Every name `node` reads (an augmented assignment's target included)."""
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            out.add(n.id)
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            out.add(n.target.id)
    return out


def _first_stores(nodes: list[ast.AST]) -> dict[str, int]:
    """The names `nodes` bind (not inside nested functions), each with its first line."""
    out: dict[str, int] = {}
    todo = list(reversed(nodes))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.setdefault(node.id, node.lineno)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.setdefault(node.name, node.lineno)
        if not isinstance(node, _NESTED + (ast.ListComp, ast.SetComp, ast.DictComp,
                                           ast.GeneratorExp)):
            todo.extend(reversed(list(ast.iter_child_nodes(node))))
    return out
