"""The AST rewrite that lets plain Python rebinding carry values through tile loops.

Tracing alone cannot see `acc += x` inside a loop, so every `for` statement of a kernel becomes

    def _td_body_7(_td_item, _td_env):
        if 'acc' in _td_env: acc = _td_env['acc']      # each name the body assigns
        tk = _td_item                                   # the loop target
        ...the original body...
        return _td_rt.collect(locals(), NAMES)
    _td_env_7 = _td_rt.loop(ITER, _td_body_7, _td_rt.capture(locals(), NAMES), NAMES, LABELS, 7,
                            READ_AFTER)
    if 'acc' in _td_env_7: acc = _td_env_7['acc']

(READ_AFTER: the names the body binds that code after the loop may read, each with the line
binding it: `tiledsl.frontend.liveness`; a grid loop may rebind only the others.)

`tiledsl.frontend.loops.loop` traces the body once for a `td.tile`/`td.grid` range and runs it as a plain
Python loop otherwise. Loops with break/continue/return/else are left as they are (they may not
iterate a tile range), except those `tiledsl.frontend.exits` folds first. A `while` statement
becomes two functions, its condition's and its body's (`loops.while_loop`), and each call goes
through `_td_helper`, which rewrites the helper functions the kernel calls the same way
(`tiledsl.frontend.helpers`). Line numbers are kept, so errors point at the user's source.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from types import FunctionType
from typing import Any, Callable

from tiledsl.frontend import exits, helpers, liveness, loops
from tiledsl.errors import Loc, TraceError


class _Assigned(ast.NodeVisitor):
    """Names a statement list binds, not looking into nested functions, classes or lambdas."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Store) and node.id not in self.names:
            self.names.append(node.id)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if not node.name.startswith("_td_") and node.name not in self.names:
            self.names.append(node.name)
        if node.name.startswith("_td_"):  # a rewritten loop body or branch
            return

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if node.name not in self.names:
            self.names.append(node.name)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        return

    def visit_ListComp(self, node: ast.AST) -> None:
        return

    visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_ListComp  # type: ignore[assignment]


class _Escapes(ast.NodeVisitor):
    """Whether a loop body leaves the loop early (break/continue at this level, or return);
    for an `if`, also `global`/`nonlocal` (a branch becomes a function of its own)."""

    def __init__(self) -> None:
        self.found = False
        self.first: ast.stmt | None = None  # the first break/continue/return found
        self.loops = 0
        self.branch = False  # checking an `if` (global/nonlocal count too)

    def visit_Break(self, node: ast.stmt) -> None:
        if self.loops == 0:
            self.found = True
            self.first = self.first or node

    visit_Continue = visit_Break  # type: ignore[assignment]

    def visit_Return(self, node: ast.AST) -> None:
        self.found = True
        self.first = self.first or node  # type: ignore[assignment]

    visit_Yield = visit_YieldFrom = visit_Return  # (a helper's `@contextmanager` generator)

    def visit_For(self, node: ast.AST) -> None:  # break/continue there belong to that loop
        self.loops += 1
        self.generic_visit(node)
        self.loops -= 1

    visit_While = visit_AsyncFor = visit_For  # type: ignore[assignment]

    def visit_FunctionDef(self, node: ast.AST) -> None:
        return

    visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_FunctionDef  # type: ignore

    def visit_Global(self, node: ast.AST) -> None:
        self.found |= self.branch

    visit_Nonlocal = visit_Global  # type: ignore[assignment]


def _escapes(stmts: list[ast.stmt]) -> bool:
    """Whether an `if` branch must stay a plain `if` (it leaves early, or declares names)."""
    finder = _Escapes()
    finder.branch = True
    for stmt in stmts:
        finder.visit(stmt)
    return finder.found


def _rt(name: str, args: list[ast.expr], at: ast.AST) -> ast.Call:
    call = ast.Call(ast.Attribute(ast.Name("_td_rt", ast.Load()), name, ast.Load()), args, [])
    return ast.fix_missing_locations(ast.copy_location(call, at))


class _Condition(ast.NodeTransformer):
    """`and`, `or` and `not` in an `if` test -> `_td_rt.both/either/negate`, which
    short-circuit on runtime scalars too (tiledsl.frontend.branches)."""

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        name = "both" if isinstance(node.op, ast.And) else "either"
        out = node.values[-1]
        for value in reversed(node.values[:-1]):
            later = ast.copy_location(ast.Lambda(ast.arguments(
                posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]), out), out)
            later._td_test = True  # type: ignore[attr-defined] (the rewrite's own: visited)
            out = _rt(name, [value, later, ast.Constant(node.lineno)], node)
        return out

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return _rt("negate", [node.operand, ast.Constant(node.lineno)], node)
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        return node

    def visit_ListComp(self, node: ast.AST) -> ast.AST:
        return node

    visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_ListComp  # type: ignore


def _target_names(target: ast.expr) -> tuple[str, ...] | None:
    if isinstance(target, ast.Name):
        return (target.id,)
    if isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name) for e in target.elts):
        return tuple(e.id for e in target.elts)  # type: ignore[attr-defined]
    return None


def _stmts(code: str, at: ast.AST) -> list[ast.stmt]:
    tree = ast.parse(code).body
    for node in tree:
        for n in ast.walk(node):
            ast.copy_location(n, at)
            if hasattr(n, "end_lineno"):  # one line, so tracebacks name the `for` line
                n.end_lineno = at.lineno
    return tree


class _LoopRewriter(ast.NodeTransformer):
    def __init__(self, read_after: dict[int, dict[str, int]],
                 local: dict[int, tuple[set[str], set[str]]], kernel: bool) -> None:
        self.count = 0
        self.depth = 0
        self.read_after = read_after  # liveness.read_after of the kernel, before rewriting
        self.local = local  # and each loop's names of one trip
        self.kernel = kernel  # a kernel (its returns are its outputs), or a helper it calls

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        if self.depth > 0:  # a helper defined inside the kernel: leave it alone
            return node
        self.declared = {n for stmt in ast.walk(node) if isinstance(stmt, (ast.Global, ast.Nonlocal))
                         for n in stmt.names}
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1
        return node

    def _binds_declared(self, stmts: list[ast.stmt]) -> bool:
        """Whether statements bind a name the function declares `global` or `nonlocal`
        (torchao's lazily built kernel: `global _k; ... if k is None: _k = k`): they stay
        plain Python, as a rewritten body is a function of its own where the name is local."""
        if not getattr(self, "declared", None) or any(
                isinstance(n, (ast.Global, ast.Nonlocal)) for s in stmts for n in ast.walk(s)):
            return False  # (a declaration inside them: the error at its line, as before)
        finder = _Assigned()
        for stmt in stmts:
            finder.visit(stmt)
        return bool(self.declared & set(finder.names))

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        """A lambda's calls are the kernel's too (FlagGems' `map(lambda v: v if isinstance(v,
        torch.Tensor) else torch.tensor(v), args)`), as an `if` test's later operand's are
        (`_Condition`)."""
        self.generic_visit(node)
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        """`table[x.dtype]` (or `table[dtype]`, a name bound to one: a Triton tutorial's
        `configs[dtype]`) -> `_td_rt.keyed(table, ...)`: a dict keyed by torch's dtypes finds a
        tensor's td dtype (tiledsl/dtypes.py)."""
        self.generic_visit(node)
        key = node.slice
        if not isinstance(node.ctx, ast.Load) or not (
                isinstance(key, ast.Attribute) and key.attr == "dtype" or
                isinstance(key, ast.Name) and isinstance(node.value, (ast.Name, ast.Dict))):
            return node
        return _rt("keyed", [node.value, node.slice], node)

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        """`a is b` -> `_td_rt.same(a, b)` (and `is not`): a tensor's td dtype is torch's of
        that name too (`x.dtype is torch.bfloat16`, tiledsl/dtypes.py); `a in b` ->
        `_td_rt.contains(b, a)` (and `not in`): also in a set or dict of torch's dtypes."""
        self.generic_visit(node)
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            has = _rt("contains", [node.comparators[0], node.left], node)
            return has if isinstance(node.ops[0], ast.In) else \
                ast.copy_location(ast.UnaryOp(ast.Not(), has), node)
        if len(node.ops) != 1 or not isinstance(node.ops[0], (ast.Is, ast.IsNot)) or \
                isinstance(node.comparators[0], ast.Constant):  # `x is None`: Python's
            return node
        same = _rt("same", [node.left, node.comparators[0]], node)
        return same if isinstance(node.ops[0], ast.Is) else \
            ast.copy_location(ast.UnaryOp(ast.Not(), same), node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        """`f(...)` (and `mod.f(...)`, `get()(...)`) -> `_td_helper(f)(...)`: a helper's own
        loops and branches are rewritten too (tiledsl/frontend/helpers.py)."""
        func = node.func
        if isinstance(func, ast.Subscript):  # `kernel[grid](...)`: a Triton launch, or Python's
            self.generic_visit(func)  # (its parts: not the subscript, which is the launch's)
            node.args = [self.visit(a) for a in node.args]
            node.keywords = [self.visit(k) for k in node.keywords]
            node.func = _rt("launch", [func.value, func.slice, ast.Name("_td_helper", ast.Load()),
                                       ast.Constant(node.lineno)], func)
            return node
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "to" and not (
                isinstance(func.value, ast.Name) and func.value.id.startswith("_td_")):
            # `zero.to(dtype)` of a Triton constexpr, `(i * BT).to(tl.int64)` of a loop's int
            node.func = func = _rt("to_of", [func.value], func)
        if isinstance(func, ast.Name) and not func.id.startswith("_td_") or \
                isinstance(func, ast.Call) or \
                isinstance(func, ast.Attribute) and not (isinstance(func.value, ast.Name)
                                                         and func.value.id == "_td_rt"):
            call = ast.Call(ast.Name("_td_helper", ast.Load()), [func], [])
            node.func = ast.fix_missing_locations(ast.copy_location(call, func))
        return node

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        """`a if c else b` -> `_td_rt.choose(c, lambda: a, lambda: b, line)`: Python's on a
        Python `c`, an `if` op on a runtime one (tiledsl.frontend.branches)."""
        self.generic_visit(node)
        empty = ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])
        sides = [ast.copy_location(ast.Lambda(empty, e), e) for e in (node.body, node.orelse)]
        return _rt("choose", [node.test, *sides, ast.Constant(node.lineno)], node)

    def visit_Return(self, node: ast.Return) -> ast.AST:
        """`return X` -> `return _td_rt.result(X, line)`: outputs are checked at that line."""
        self.generic_visit(node)
        if not self.kernel:
            return node
        value = node.value if node.value is not None else ast.Constant(None)
        node.value = ast.Call(ast.Attribute(ast.Name("_td_rt", ast.Load()), "result", ast.Load()),
                              [value, ast.Constant(node.lineno)], [])
        ast.fix_missing_locations(ast.copy_location(node.value, node))
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        """`a and b` outside an `if` or `while` test -> `_td_rt.logical(a, lambda: b, line,
        False)`: Triton's elementwise logical and on bool tiles (tiledsl.frontend.branches)."""
        self.generic_visit(node)
        out = node.values[-1]
        empty = ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])
        for value in reversed(node.values[:-1]):
            later = ast.copy_location(ast.Lambda(empty, out), out)
            out = _rt("logical", [value, later, ast.Constant(node.lineno),
                                  ast.Constant(isinstance(node.op, ast.Or))], node)
        return out

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        """`assert test, msg` -> `_td_rt.check(test, lambda: msg, line)`: a device assertion
        on a tile value inside a grid, Python's own on anything else (tiledsl/lang/asserts.py)."""
        self.generic_visit(node)
        empty = ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])
        msg = ast.Constant(None) if node.msg is None else \
            ast.copy_location(ast.Lambda(empty, node.msg), node.msg)
        call = _rt("check", [node.test, msg, ast.Constant(node.lineno)], node)
        return ast.copy_location(ast.Expr(call), node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        """`not x` outside an `if` or `while` test -> `_td_rt.logical_not(x, line)`: Triton's
        elementwise not on a tile (tiledsl.frontend.branches)."""
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return _rt("logical_not", [node.operand, ast.Constant(node.lineno)], node)
        return node

    def visit_If(self, node: ast.If) -> Any:
        """`if` -> a call of `_td_rt.branch` with each branch a function of the names it
        assigns (as loop bodies are), so a runtime condition can trace both."""
        if not getattr(node, exits.STATIC, False):  # (its test's own `and`, `or` and `not`)
            node.test = _Condition().visit(node.test)
        self.generic_visit(node)
        if getattr(node, exits.STATIC, False):  # choosing a folded loop (exits.py)
            return node
        if _escapes(node.body) or _escapes(node.orelse) or \
                self._binds_declared(node.body + node.orelse):
            node.test = _rt("truth", [node.test, ast.Constant(node.lineno)], node)
            return node
        self.count += 1
        k = f"{node.lineno}_{self.count}"
        finder = _Assigned()
        for stmt in node.body + node.orelse:
            finder.visit(stmt)
        names = tuple(n for n in finder.names if not n.startswith("_td_"))
        prologue = "".join(f"if {n!r} in _td_env: {n} = _td_env[{n!r}]\n" for n in names)
        ret = f"return _td_rt.collect(locals(), {names!r})"
        funcs = []
        for which, body in (("then", node.body), ("else", node.orelse)):
            func = _stmts(f"def _td_{which}_{k}(_td_env):\n"
                          + textwrap.indent(prologue + ret + "\n", "    "), node)[0]
            assert isinstance(func, ast.FunctionDef)
            func.body = func.body[:-1] + body + func.body[-1:]
            funcs.append(ast.fix_missing_locations(func))
        call = _stmts(f"_td_env_{k} = _td_rt.branch(None, _td_then_{k}, _td_else_{k}, "
                      f"_td_rt.capture(locals(), {names!r}), {names!r}, {node.lineno})", node)[0]
        assert isinstance(call, ast.Assign) and isinstance(call.value, ast.Call)
        call.value.args[0] = node.test
        rebind = _stmts("".join(f"if {n!r} in _td_env_{k}: {n} = _td_env_{k}[{n!r}]\n"
                                for n in names), node) if names else []
        return [*funcs, call, *rebind]

    def visit_While(self, node: ast.While) -> Any:
        """`while c: body` -> functions of the names the body assigns, for the condition and
        the body, run by `_td_rt.while_loop` (a Python loop, or a `while` op on a runtime `c`).
        A loop with break/continue/return or an else clause stays a `while` statement whose
        condition `_td_rt.loop_test` refuses to be a runtime value."""
        node.test = _Condition().visit(node.test)  # (its own `and`, `or` and `not`)
        self.generic_visit(node)
        if node.orelse or _escapes(node.body) or self._binds_declared(node.body):
            node.test = _rt("loop_test", [node.test, ast.Constant(node.lineno)], node)
            return node
        self.count += 1
        k = f"{node.lineno}_{self.count}"
        finder = _Assigned()
        for stmt in node.body:
            finder.visit(stmt)
        names = tuple(n for n in finder.names if not n.startswith("_td_"))
        prologue = "".join(f"if {n!r} in _td_env: {n} = _td_env[{n!r}]\n" for n in names)
        test, body = _stmts(f"def _td_test_{k}(_td_env):\n" + textwrap.indent(
            prologue + "return None\n", "    ") + f"def _td_wbody_{k}(_td_env):\n"
            + textwrap.indent(prologue + f"return _td_rt.collect(locals(), {names!r})\n", "    "),
            node)
        assert isinstance(test, ast.FunctionDef) and isinstance(body, ast.FunctionDef)
        returned = test.body[-1]
        assert isinstance(returned, ast.Return)
        returned.value = node.test
        body.body = body.body[:-1] + node.body + body.body[-1:]
        call = _stmts(f"_td_env_{k} = _td_rt.while_loop(_td_test_{k}, _td_wbody_{k}, "
                      f"_td_rt.capture(locals(), {names!r}), {names!r}, {node.lineno})", node)
        rebind = _stmts("".join(f"if {n!r} in _td_env_{k}: {n} = _td_env_{k}[{n!r}]\n"
                                for n in names), node) if names else []
        return [ast.fix_missing_locations(test), ast.fix_missing_locations(body), *call, *rebind]

    def visit_For(self, node: ast.For) -> Any:
        read_after = self.read_after.get(id(node), {})
        sure, maybe = self.local.get(id(node), (set(), set()))
        it = node.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range":
            it.func = ast.copy_location(ast.Attribute(ast.Name("_td_rt", ast.Load()), "range_",
                                                      ast.Load()), it.func)  # runtime bounds
        self.generic_visit(node)
        escapes = _Escapes()
        for stmt in node.body:
            escapes.visit(stmt)
        if escapes.found or node.orelse or self._binds_declared(node.body):
            at = escapes.first  # the error names its line (an else clause: the loop's)
            what = type(at).__name__.lower() if at is not None else \
                "else" if node.orelse else "global"
            node.iter = ast.Call(ast.Attribute(ast.Name("_td_rt", ast.Load()), "plain", ast.Load()),
                                 [node.iter, ast.Constant(at.lineno if at else node.lineno),
                                  ast.Constant(what)], [])
            ast.fix_missing_locations(ast.copy_location(node.iter, node))
            return node
        self.count += 1
        k = f"{node.lineno}_{self.count}"
        finder = _Assigned()
        finder.visit(node.target)
        for stmt in node.body:
            finder.visit(stmt)
        names = tuple(finder.names)
        labels = _target_names(node.target)
        prologue = "".join(f"if {n!r} in _td_env: {n} = _td_env[{n!r}]\n" for n in names)
        func = _stmts(f"def _td_body_{k}(_td_item, _td_env):\n"
                      + textwrap.indent(prologue or "pass\n", "    "), node)[0]
        assert isinstance(func, ast.FunctionDef)
        unpack = ast.Assign([node.target], ast.Name("_td_item", ast.Load()))
        ast.copy_location(unpack, node)
        ret = _stmts(f"return _td_rt.collect(locals(), {names!r})", node)
        func.body = func.body + [unpack] + node.body + ret
        call = _stmts(f"_td_env_{k} = _td_rt.loop(None, _td_body_{k}, "
                      f"_td_rt.capture(locals(), {names!r}), {names!r}, {labels!r}, {node.lineno}, "
                      f"{read_after!r}, {tuple(sorted(sure))!r}, {tuple(sorted(maybe))!r})",
                      node)[0]
        assert isinstance(call, ast.Assign) and isinstance(call.value, ast.Call)
        # (_td_rt.targets(n), ITER)[1]: td.tile sees how many names the target binds
        announce = ast.Tuple([_rt("targets", [ast.Constant(len(labels) if labels else None)],
                                  node.iter), node.iter], ast.Load())
        call.value.args[0] = ast.copy_location(
            ast.Subscript(ast.copy_location(announce, node.iter), ast.Constant(1), ast.Load()),
            node.iter)
        rebind = _stmts("".join(f"if {n!r} in _td_env_{k}: {n} = _td_env_{k}[{n!r}]\n"
                                for n in names), node) if names else []
        return [ast.fix_missing_locations(func), call, *rebind]


def _helper(fn: Any) -> Any:
    """What the rewritten code calls for `fn(...)` (tiledsl/frontend/helpers.py)."""
    return helpers.helper(fn, rewrite)


def _own_nodes(fdef: ast.FunctionDef) -> Any:
    """The nodes of a function's body, less those of functions and lambdas defined inside it."""
    todo = list(fdef.body)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                 ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))


def rewrite(fn: FunctionType, source: str, kernel: bool = True) -> Callable[..., Any]:
    """`fn`, whose source text is `source`, with its loops rewritten (same globals, closure
    values and line numbers); a kernel's returns are checked as its outputs, a helper's
    (`kernel` False) are its own."""
    file = inspect.getsourcefile(fn) or fn.__code__.co_filename
    tree = ast.parse(textwrap.dedent(source))
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise TraceError(f"@td.tile_kernel needs a plain `def` function, got {type(fdef).__name__}")
    fdef.decorator_list = []
    # Inside the factory, the kernel's own name would be the rewritten function itself: a call
    # of the kernel by name in its body must reach the module's kernel object (and its error)
    fdef.name = f"_td_kernel_{fdef.name}"
    ast.increment_lineno(tree, fn.__code__.co_firstlineno - 1)
    for node in _own_nodes(fdef) if kernel else ():
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            raise TraceError(f"kernel '{fn.__name__}' is a generator (it has `yield`); a tile "
                             "kernel returns its outputs", loc=Loc(file, node.lineno),
                             hint="use `return` instead of `yield`")
    exits.fold(fdef)
    _LoopRewriter(*liveness.read_after(fdef), kernel).visit(fdef)
    freevars = fn.__code__.co_freevars
    factory = ast.FunctionDef(
        name="_td_factory",
        args=ast.arguments(posonlyargs=[], args=[ast.arg("_td_rt"), ast.arg("_td_helper")]
                           + [ast.arg(v) for v in freevars],
                           kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=[fdef, ast.Return(ast.Name(fdef.name, ast.Load()))],
        decorator_list=[], returns=None, type_params=[],
    )
    ast.copy_location(factory, fdef)
    module = ast.fix_missing_locations(ast.Module([factory], type_ignores=[]))
    namespace: dict[str, Any] = {}
    try:
        code = compile(module, file, "exec")
    except SyntaxError as e:  # valid Python the loop rewrite cannot keep valid
        raise TraceError(f"this statement cannot be used inside a tile loop ({e.msg})",
                         loc=Loc(file, e.lineno) if e.lineno else None,
                         hint="a tile loop's body is traced as a function of its own, where "
                              "`global` and `nonlocal` cannot be used: store results to a "
                              "tensor, or carry them in a value bound before the loop") from None
    exec(code, fn.__globals__, namespace)
    new = namespace["_td_factory"](loops, _helper, *(None for _ in freevars))
    # the kernel's own closure cells, not copies of their values: a closure variable bound
    # again later is read as it is when the kernel traces (reads.py keys the traces by it)
    own = dict(zip(freevars, fn.__closure__ or ()))
    new = FunctionType(new.__code__, new.__globals__, new.__name__, None, tuple(
        own.get(name, cell) for name, cell in zip(new.__code__.co_freevars, new.__closure__ or ())
    ) or None)
    new.__code__ = new.__code__.replace(co_name=fn.__name__, co_qualname=fn.__qualname__)
    new.__name__, new.__qualname__ = fn.__name__, fn.__qualname__
    new.__defaults__ = fn.__defaults__
    new.__kwdefaults__ = fn.__kwdefaults__
    return new
