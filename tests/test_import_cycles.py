"""No import cycles among the project's modules (tiledsl/, lowering/, autotune/), and no
function in the autotuner over 100 lines.

The graph: a module imports another when it says `import a.b` or `from a import b` (an edge to
the module a.b when there is one, else to the package a's __init__), at module level or inside
a function. Both count: an import inside a function that closes a cycle still makes the two
modules need each other, it only hides the cycle from the import order (every cycle the project
had was closed that way). Imports under `if TYPE_CHECKING:` never run and do not count; nor
does the parent package's __init__ that importing a submodule runs (else every package that
re-exports its modules would be a cycle).

A cycle is a strongly connected component of the graph: modules that import each other,
directly or through others. The test lists the components it finds that are not known, each
with one cycle through it, edge by edge (file:line, and whether the import is inside a
function).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tiledsl", "lowering", "autotune")

# cycles tolerated for now, each a sorted tuple of modules: none left (issue 34 items 2 and 3)
KNOWN_CYCLES: list[tuple[str, ...]] = []

Edge = tuple[str, int, bool]  # the importing file, the line, whether inside a function
Graph = dict[str, dict[str, Edge]]  # module -> imported module -> its first such import


def modules(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Module name -> file, for every .py file of the packages."""
    out = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


@functools.cache
def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _imports(node: ast.AST, in_function: bool = False) -> Iterator[tuple[ast.stmt, bool]]:
    """(statement, whether inside a function) for each import under `node` that can run."""
    children: Iterable[ast.AST] = ast.iter_child_nodes(node)
    if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
        children = node.orelse  # the body runs for type checkers only
    for child in children:
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, in_function
        else:
            yield from _imports(child, in_function or isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))


def graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> Graph:
    mods = modules(root, packages)

    def known(name: str) -> str | None:  # the module itself, else its closest package
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    out: Graph = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: dict[str, Edge] = {}
        for node, in_function in _imports(parse(path)):
            if isinstance(node, ast.Import):
                targets = [known(a.name) for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else known(base)
                           for a in node.names]
            for target in targets:
                if target is not None and target != name and target not in edges:
                    edges[target] = (str(path.relative_to(root)), node.lineno, in_function)
        out[name] = edges
    return out


def cycles(g: Graph) -> list[tuple[str, ...]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, without
    recursion), each as a sorted tuple; sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in g:
        if root in index:
            continue
        work = [(root, iter(g[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, targets = work[-1]
            w = next(targets, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(g[w])))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(tuple(sorted(component)))
    return sorted(found)


def one_cycle(g: Graph, component: tuple[str, ...]) -> str:
    """A cycle through the component's first module, edge by edge (the shortest back)."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in g[v]:
            if w == start:
                path = paths[v] + [start]
                return "\n".join(
                    f"    {a} imports {b} ({g[a][b][0]}:{g[a][b][1]}"
                    f"{', inside a function' if g[a][b][2] else ''})"
                    for a, b in zip(path, path[1:]))
            if w in members and w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    raise AssertionError(f"no cycle through {component}")


def test_no_import_cycles() -> None:
    g = graph()
    found = cycles(g)
    new = [c for c in found if c not in KNOWN_CYCLES]
    assert not new, "import cycles (break them: move what both need into a module of its own):\n" \
        + "\n".join(f"  {', '.join(c)}:\n{one_cycle(g, c)}" for c in new)
    gone = [c for c in KNOWN_CYCLES if c not in found]
    assert not gone, f"no longer cycles, as listed: {gone}; update KNOWN_CYCLES"


def test_a_cycle_closed_inside_a_function_is_found(tmp_path: Path) -> None:
    """The checker itself: a cycle through an import inside a function counts (with its line),
    an import only for type checking does not, and `from pkg import mod` reaches the module."""
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "__init__.py").write_text("")
    (tmp_path / "p" / "a.py").write_text("from p import b\n")
    (tmp_path / "p" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p import c\n"
        "def f():\n    from p.a import x\n")
    (tmp_path / "p" / "c.py").write_text("import p.b\n")
    g = graph(tmp_path, ("p",))
    assert cycles(g) == [("p.a", "p.b")]
    assert one_cycle(g, ("p.a", "p.b")) == ("    p.a imports p.b (p/a.py:1)\n"
                                            "    p.b imports p.a (p/b.py:5, inside a function)")


MAX_FUNCTION_LINES = 100  # issue 34 item 3: a function fits on a screen or two


def test_no_function_is_over_100_lines() -> None:
    """In tiledsl/, lowering/ and autotune/ (nested functions count within the one holding
    them: a 198-line torch_op of closures is one long function)."""
    long = []
    paths = (path for area in ("tiledsl", "lowering", "autotune")
             for path in sorted((ROOT / area).rglob("*.py")))
    for path in paths:
        for node in ast.walk(parse(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} "
                                "lines)")
    assert not long, "functions over 100 lines (split them into named steps):\n" + "\n".join(long)
