"""`td.torch_op`: a tile kernel as a PyTorch custom operator (`torch.library.custom_op`).

    mm = td.torch_op(matmul, name="mylib::matmul")
    out = torch.compile(lambda a, b: mm(a, b) + 1, fullgraph=True)(a, b)

* Schema: a parameter annotated (or defaulted) `int`, `float`, `bool` or `str` has that type
  (a bool or str is a compile-time argument of the kernel: the op traces once per value); any
  other annotation means a `Tensor`. An unannotated one is a `Tensor` where the body indexes it
  or reads its shape, a `Scalar` (an int, float or bool, passed on as it is) where the body
  computes with it (`ms + eps`): tiledsl/frontend/param_uses.py; one used both ways or neither way is an
  ArgumentError asking for an annotation. A parameter defaulted to a function (an epilogue) is
  refused, as no schema holds one; the return is one `Tensor`, a tuple of them, or nothing, read from the
  kernel's `return` statements (pass `outputs=N` when they are not literal). A schema holds no
  optional output, so a `None` or a number in the kernel's returned tuple is not part of the
  op's return: `return o, None` makes an op returning `o` alone (`outputs=` counts the
  tensors; pass it where the numbers are not literals: `return y, rstd, BLOCK_SIZE`).
* Fake (meta) implementation: the kernel traced for the fake tensors' shapes and dtypes, with
  no data, so torch.compile sees exact output shapes and dtypes and never breaks the graph.
  Symbolic sizes (dynamic shapes) get symbolic output sizes from the kernel's shape function
  (tiledsl/frontend/symdims.py), guarded on the size comparisons its trace made; one graph serves every
  size until a comparison flips.
* Real implementation: CUDA tensors launch the Triton backend; CPU tensors run the NumPy backend
  through zero-copy views (outputs are NumPy memory handed to torch without a copy).
* Kernels that write arguments in place declare them with `mutates_args=("x",)`; a kernel that
  writes an argument it did not declare is an ArgumentError (torch.compile would otherwise
  reorder or drop the write). An output that aliases an argument is returned as a copy, as
  custom operators require.

torch is imported when `torch_op` is called, never by `import tiledsl`.
"""

from __future__ import annotations

import ast
import inspect
import math
import re
import textwrap
import warnings
from typing import Any, Sequence

from tiledsl.interop import arrays
from tiledsl import dtypes
from tiledsl.runtime import registry, returns
from tiledsl.errors import ArgumentError, BackendError, Loc, TileDSLWarning
from tiledsl.ir import views
from tiledsl.ir.types import TensorType
from tiledsl.runtime.kernel import TileKernel
from tiledsl.frontend.param_uses import Uses, parameter_uses
from tiledsl.frontend.static_args import annotated_constexpr

_SCALARS = {int: "int", float: "float", bool: "bool", str: "str", "int": "int",
            "float": "float", "bool": "bool", "str": "str"}
_OP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*::[A-Za-z_][A-Za-z0-9_]*")
# op name -> (kernel name, file) of what tiledsl registered under it: registering the same
# kernel again (a re-run notebook cell, a redefined kernel) replaces it, another kernel may not
_REGISTERED: dict[str, tuple[str, str]] = {}


def torch_op(kernel: TileKernel | None = None, *, name: str, mutates_args: Sequence[str] = (),
             outputs: int | None = None, triton: bool = False) -> Any:
    """Register `kernel` as the custom operator `name` ("namespace::op"); returns the op (a
    callable `torch._library.custom_ops.CustomOpDef`). Also usable as a decorator above
    `@td.tile_kernel`: `@td.torch_op(name="mylib::add")`.

    `triton=True` registers it with `torch.library.triton_op` instead: its body launches the
    generated `@triton.jit` kernels through `torch.library.wrap_triton`, so torch.compile
    traces into them (Inductor sees the Triton kernels, not an opaque call). It launches the
    config space's default config (fake tensors cannot key the result cache, and eager and
    compiled calls must agree); use the default path for tuned configs. CPU tensors still run
    on the NumPy backend."""
    if kernel is None:
        return lambda k: torch_op(k, name=name, mutates_args=mutates_args, outputs=outputs,
                                  triton=triton)
    if not isinstance(kernel, TileKernel):
        raise ArgumentError(f"td.torch_op takes a @td.tile_kernel, got {type(kernel).__name__}")
    try:
        import torch
    except ImportError:
        raise BackendError("td.torch_op needs PyTorch: pip install torch") from None
    params = list(kernel.signature.parameters.values())
    _refuse_function_parameters(kernel, params)
    kinds = _kinds(kernel, params)
    _check_mutates_args(kernel, params, mutates_args)
    n_out = _count_outputs(kernel) if outputs is None else outputs
    _claim_name(torch, kernel, name, triton)
    op = _Op(torch, kernel, name, params, set(mutates_args), n_out)
    if triton:
        return op.register_triton(kinds, tuple(mutates_args))
    return op.register(kinds, tuple(mutates_args))


def _refuse_function_parameters(kernel: TileKernel, params: list[inspect.Parameter]) -> None:
    for p in params:
        if p.default is not p.empty and callable(p.default) or p.annotation in ("Callable",) or \
                str(p.annotation).startswith(("Callable", "typing.Callable")):
            raise ArgumentError(f"parameter '{p.name}' of kernel '{kernel.name}' takes a "
                                "function (a compile-time argument), which a custom op's schema "
                                "cannot hold", kernel=kernel.name,
                                hint="register a kernel that calls the function itself, or "
                                     "call the tile kernel directly")


def _check_mutates_args(kernel: TileKernel, params: list[inspect.Parameter],
                        mutates_args: Sequence[str]) -> None:
    if isinstance(mutates_args, str):  # set("out") would be {'o', 'u', 't'}
        raise ArgumentError(f"mutates_args is the string {mutates_args!r}; pass a tuple of "
                            f"parameter names, e.g. mutates_args=({mutates_args!r},)",
                            kernel=kernel.name)
    unknown = set(mutates_args) - {p.name for p in params}
    if unknown:
        raise ArgumentError(f"mutates_args names {sorted(unknown)}, which are not parameters "
                            f"of kernel '{kernel.name}'", kernel=kernel.name)


def _claim_name(torch: Any, kernel: TileKernel, name: str, triton: bool) -> None:
    """Checks the op name (and, with `triton`, its CPU op's) and records it as this kernel's."""
    if not isinstance(name, str) or not _OP_NAME.fullmatch(name):
        raise ArgumentError(f"custom op name {name!r} must be 'namespace::name', each part an "
                            "identifier (ASCII letters, digits and _, not starting with a "
                            "digit)", kernel=kernel.name)
    for taken in (name, f"{name}_cpu") if triton else (name,):
        namespace, op_name = taken.split("::")
        again = _REGISTERED.get(taken) == (kernel.name, kernel.file)  # a re-run notebook cell
        if hasattr(getattr(torch.ops, namespace), op_name) and not again:
            # torch would replace it: the op registered first would then run this kernel
            raise ArgumentError(f"a custom op named {taken} is already registered; pick "
                                "another name", kernel=kernel.name)
        _REGISTERED[taken] = (kernel.name, kernel.file)


class _Op:
    """A kernel as a custom op `name`: its implementations (`impl`, `fake`, and for
    `triton_op`, `traceable`) and their registration with torch."""

    def __init__(self, torch: Any, kernel: TileKernel, name: str,
                 params: list[inspect.Parameter], declared: set[str], n_out: int) -> None:
        self.torch = torch
        self.kernel = kernel
        self.name = name
        self.params = params
        self.declared = declared  # the parameters it may write in place
        self.n_out = n_out
        self.on_cpu: Any = None  # with triton_op: the custom op running the NumPy path

    def register(self, kinds: list[str], mutates_args: tuple[str, ...]) -> Any:
        """A `custom_op`: impl, with fake for torch.compile."""
        impl = self._function(self.impl, kinds)
        op = self.torch.library.custom_op(self.name, impl, mutates_args=mutates_args)
        op.register_fake(self.fake)
        self.differentiable_by_error(op)
        return op

    def register_triton(self, kinds: list[str], mutates_args: tuple[str, ...]) -> Any:
        """A `triton_op` (`traceable`), and for CPU tensors under torch.compile the NumPy path as
        an opaque op (Triton's kernel analysis, which traces wrap_triton launches, needs a GPU
        driver)."""
        torch = self.torch
        impl = self._function(self.impl, kinds)
        self.on_cpu = torch.library.custom_op(f"{self.name}_cpu", impl,
                                              mutates_args=mutates_args)
        self.on_cpu.register_fake(self.fake)
        self.differentiable_by_error(self.on_cpu)
        traceable = self._function(self.traceable, kinds)
        op = torch.library.triton_op(self.name, traceable, mutates_args=mutates_args)
        op.register_kernel("cpu")(impl)
        self.differentiable_by_error(op)
        return op

    def _function(self, method: Any, kinds: list[str]) -> Any:
        """`method` as a function with the op's schema as its signature (torch reads it)."""
        torch = self.torch

        def op(*args: Any) -> Any:
            return method(*args)

        ret: Any = (None if self.n_out == 0 else torch.Tensor if self.n_out == 1
                    else tuple.__class_getitem__((torch.Tensor,) * self.n_out))
        op.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                               annotation=torch.Tensor if k == "Tensor" else
                               torch.types.Number if k == "Scalar" else _PY[k],
                               default=p.default)
             for p, k in zip(self.params, kinds)], return_annotation=ret)
        op.__name__ = self.kernel.name
        return op

    def spec(self, args: tuple, specialize: bool = False) -> tuple:
        return self.kernel.specialized(lambda: tuple(
            _fake_spec(self.kernel, p.name, a, specialize) for p, a in zip(self.params, args)))

    def refuse_grad_writes(self, args: tuple) -> None:
        """Torch gives ops that mutate no autograd formula: eager and compiled alike, a write
        into a tensor that requires grad would be invisible to autograd (wrong gradients)."""
        for p, a in zip(self.params, args):
            if p.name in self.declared and isinstance(a, self.torch.Tensor) and a.requires_grad:
                raise ArgumentError(f"op {self.name} writes argument '{p.name}' in place, and "
                                    "that tensor requires grad (autograd cannot see the "
                                    "write); pass a tensor without grad (.detach() shares its "
                                    "memory)", kernel=self.kernel.name)

    def refuse_undeclared_writes(self, spec: tuple) -> None:
        kernel = self.kernel
        undeclared = [w for w in kernel.traces.written(spec) if w not in self.declared]
        if undeclared:
            raise ArgumentError(f"kernel '{kernel.name}' writes {undeclared} in place; declare "
                                f"them with td.torch_op(..., mutates_args="
                                f"{tuple(undeclared)!r})", kernel=kernel.name)

    def impl(self, *args: Any) -> Any:
        """The real implementation: Triton for CUDA tensors, NumPy (zero-copy) for CPU ones."""
        kernel, torch = self.kernel, self.torch
        self.refuse_grad_writes(args)
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        self.refuse_undeclared_writes(self.spec(args))
        kernel.traces.get(self.spec(args)).only_arguments("a custom op")
        gpu = any(t.is_cuda for t in tensors)
        if gpu:
            result = kernel.run(*args, backend="triton")
            values = list(args)
        else:
            values = [arrays.to_numpy(a, kernel.name, p.name) if isinstance(a, torch.Tensor)
                      else a for p, a in zip(self.params, args)]
            result = kernel.run(*values, backend="numpy")
        outs = returns.tensors(result)  # a None left out: no schema holds one
        if len(outs) != self.n_out:
            raise ArgumentError(f"kernel '{kernel.name}' returned {len(outs)} tensors, the op "
                                f"{self.name} was registered with {self.n_out}; pass outputs=",
                                kernel=kernel.name, hint=None if not isinstance(result, tuple)
                                or len(outs) == len(result) else "a None or a number in the "
                                "returned tuple is not part of the op's return (custom ops have "
                                "no optional outputs): make the number of tensors the same in "
                                "every call, and pass outputs= when the tuple returns numbers")
        converted = []
        for out in outs:
            alias = next((a for a, v in zip(args, values) if v is out), None)
            if alias is not None:
                converted.append(alias.clone())  # custom ops may not return their inputs
            elif gpu:
                converted.append(out)
            else:
                converted.append(arrays.from_numpy(out, tensors[0]))
        return _pack(converted, self.n_out)

    def fake(self, *args: Any) -> Any:
        """Output shapes for (possibly symbolic) sizes: the kernel's shape function evaluated
        on torch's sizes, guarded on the size comparisons the trace made (symdims.py)."""
        kernel, torch = self.kernel, self.torch
        self.refuse_grad_writes(args)
        spec = self.spec(args)
        fn = kernel.traces.get(spec).only_arguments("a custom op").ir
        sizes = self._output_sizes(args, spec, fn)
        device = next(a.device for a in args if isinstance(a, torch.Tensor))
        outs = []
        for v, shape in zip(fn.outputs, sizes):
            if v in fn.args:
                outs.append(torch.empty_like(kernel.specs.flat(spec, list(args))[fn.args.index(v)]))
                continue
            t = v.type
            assert isinstance(t, TensorType)
            order = _memory_order(v)  # (an empty_like of a transposed input is transposed)
            outs.append(torch.empty([shape[d] for d in order], dtype=_torch_dtype(
                torch, t.dtype.name), device=device).permute([order.index(d) for d in
                                                              range(len(order))]))
        return _pack(outs, self.n_out)

    def _output_sizes(self, args: tuple, spec: tuple, fn: Any) -> list:
        """The outputs' sizes from torch's (possibly symbolic) sizes of `args`."""
        kernel = self.kernel
        shapes = kernel.traces.shape_function(spec)
        if shapes.followed:
            def size(i: int, d: int) -> Any:
                return args[i].shape[d]
            if not shapes.holds(size):  # the sizes are the trace's hints: cannot fail
                raise BackendError(f"kernel '{kernel.name}': the shape function does not hold "
                                   "for the sizes it was traced for", kernel=kernel.name)
            return shapes.shapes(size)
        # an output size left Python's arithmetic: specialize on every size
        symbolic = [n for a in args if isinstance(a, self.torch.Tensor) for n in a.shape
                    if not isinstance(n, int)]
        if symbolic:
            warnings.warn(f"{shapes.lost or kernel.file}: kernel '{kernel.name}' computes an "
                          "output size through int(), float(), / or ** on sizes, which "
                          "tiledsl cannot follow for dynamic shapes; torch.compile "
                          "specializes on every input size (keep size arithmetic to "
                          "+ - * // % and comparisons)", TileDSLWarning, stacklevel=3)
        for n in symbolic:
            int(n)  # a guard on the size's value
        return [v.type.shape for v in fn.outputs]

    def traceable(self, *args: Any) -> Any:
        """The triton_op body: generated kernels launched through wrap_triton (also the fake
        implementation: torch runs it on fake tensors)."""
        kernel, torch = self.kernel, self.torch
        if not any(isinstance(a, torch.Tensor) and a.is_cuda for a in args):
            return self.on_cpu(*args)
        values = list(args)
        # the launch (grid, shapes) is traced into the graph: specialize on every size
        spec = self.spec(args, specialize=True)
        # (torch.compile would otherwise drop the write: the op's schema says it makes none)
        self.refuse_undeclared_writes(spec)
        space = kernel.space(spec, "triton")
        backend = registry.backend("triton")
        traced = kernel.traces.get(spec).only_arguments("a custom op")
        outs = backend.launch_traced(  # type: ignore[attr-defined]
            traced.for_backend("triton"), kernel.specs.flat(spec, values), space.default(),
            wrap=torch.library.wrap_triton)
        converted = [o.clone() if any(o is a for a in args) else o for o in outs]
        return _pack(converted, self.n_out)

    def no_backward(self, ctx: Any, *grads: Any) -> Any:
        raise ArgumentError(f"op {self.name} has no backward (tile kernels are not "
                            "differentiable); call it under torch.no_grad() or on detached "
                            "tensors", kernel=self.kernel.name)

    def differentiable_by_error(self, custom: Any) -> None:
        """Backward through the op is an ArgumentError naming it (torch refuses an autograd
        formula for ops that mutate or return nothing; refuse_grad_writes covers those)."""
        if not self.declared and self.n_out > 0:
            custom.register_autograd(self.no_backward, setup_context=_no_context)


_PY: dict[str, type] = {"int": int, "float": float, "bool": bool, "str": str}


def _no_context(ctx: Any, inputs: tuple, output: Any) -> None:
    """setup_context of an op whose backward only raises: nothing to save."""


def _kinds(kernel: TileKernel, params: list[inspect.Parameter]) -> list[str]:
    """Each parameter's schema type: from its annotation or default, else from how the body
    uses it (tiledsl/frontend/param_uses.py): a tensor, or a number (`Scalar`: an int, float or bool
    reaches the kernel as it is, so it traces as a direct call would)."""
    uses = parameter_uses(kernel.traces.source_text(), [p.name for p in params], kernel.fn.__globals__)
    kinds = []
    for p in params:
        if annotated_constexpr(p.annotation):  # `bins: td.constexpr`: a compile-time int
            kinds.append("int")
        elif p.annotation is not inspect.Parameter.empty:
            kinds.append(_SCALARS.get(p.annotation, "Tensor"))
        elif p.default is not inspect.Parameter.empty:
            kinds.append(_SCALARS.get(type(p.default), "Tensor"))
        else:
            kinds.append(_used_as(kernel, p.name, uses[p.name]))
    return kinds


def _used_as(kernel: TileKernel, name: str, uses: Uses) -> str:
    if uses.tensor and not uses.number:
        return "Tensor"
    if uses.number and not uses.tensor:
        return "Scalar"
    first = kernel.fn.__code__.co_firstlineno - 1
    how = (f"as a tensor (line {first + uses.tensor[0]}) and as a number (line "
           f"{first + uses.number[0]})" if uses.tensor else "in a way that shows its kind")
    raise ArgumentError(f"td.torch_op cannot tell whether parameter '{name}' is a tensor or a "
                        f"number: the kernel body uses it {how}", kernel=kernel.name,
                        loc=Loc(kernel.file, kernel.traces.def_line()),
                        hint=f"annotate it: `{name}: float` (or int, bool) for a number, "
                             f"`{name}: td.Tensor` for a tensor")


def _count_outputs(kernel: TileKernel) -> int:
    """Outputs per call, from the kernel's `return` statements (they must agree)."""
    tree = ast.parse(textwrap.dedent(kernel.traces.source_text()))
    counts = set()
    fn_node = tree.body[0]
    for node in ast.walk(fn_node):
        if isinstance(node, (ast.FunctionDef, ast.Lambda)) and node is not fn_node:
            continue
        if isinstance(node, ast.Return):
            v = node.value
            counts.add(0 if v is None else _tensors_in(v.elts) if isinstance(v, ast.Tuple) else 1)
    if len(counts) > 1:
        raise ArgumentError(f"kernel '{kernel.name}' returns different numbers of outputs; "
                            "pass outputs= to td.torch_op", kernel=kernel.name)
    return counts.pop() if counts else 0


def _tensors_in(elements: list[ast.expr]) -> int:
    """The elements of a returned tuple literal that are not a literal None or number."""
    return sum(not isinstance(e, ast.Constant) for e in elements)


def _memory_order(v: Any) -> list[int]:
    """The order in memory (outermost first) of output `v`, a tensor the kernel allocates or
    a view of one, where its strides are a permutation of row-major ones; else row-major."""
    shape = v.type.shape
    root = views.root(v)
    strides = views.strides_of(v, views.row_major(root.type.shape))
    order = list(views.stride_order(shape, strides)) if strides is not None else []
    dense = strides is not None and all(
        strides[d] == math.prod(shape[e] for e in order[k + 1:])
        for k, d in enumerate(order) if shape[d] != 1)
    return order if dense else list(range(len(shape)))


def _fake_spec(kernel: TileKernel, name: str, a: Any, specialize: bool = False) -> tuple:
    """The argument's spec; a symbolic size counts as its hint (the size torch.compile traced
    with), with no guard unless `specialize`."""
    if hasattr(a, "shape") and hasattr(a, "dtype"):
        d = dtypes.from_any(str(a.dtype).rsplit(".", 1)[-1])
        if d is None:
            raise ArgumentError(f"argument '{name}' has unsupported dtype {a.dtype}",
                                kernel=kernel.name)
        try:
            shape = tuple(int(s) if specialize else _hint(s) for s in a.shape)
        except Exception:  # torch refuses to specialize a size that depends on data
            shape = (None,)
        if None in shape:  # an unbacked size (from data) has no value to trace with
            raise ArgumentError(f"argument '{name}' has a data-dependent shape "
                                f"{tuple(a.shape)}; tile kernels are traced for concrete "
                                "sizes", kernel=kernel.name)
        strides = _layout(a, shape, specialize)
        return ("tensor", shape, d.short) if strides is None else \
            ("tensor", shape, d.short, strides)
    kind = type(a).__name__
    if kind == "SymInt" and name in kernel.specs.static:  # the kernel needs its value: a guard
        return kernel.specs.of(name, int(a))
    if kind in ("SymInt", "SymFloat", "SymBool"):  # a scalar torch.compile made symbolic:
        # only its kind matters to the trace (an int is an int64 whatever its value)
        return ("scalar", {"SymInt": "i64", "SymFloat": "f64", "SymBool": "i1"}[kind], True)
    return kernel.specs.of(name, a)


def _layout(a: Any, shape: tuple[int, ...], specialize: bool) -> tuple[int, ...] | None:
    """The strides of a tensor that is not row-major, as arg_specs.layout gives them: the
    trace (and so the output's layout, an empty_like's) is the real call's."""
    try:
        strides = tuple(int(s) if specialize else _hint(s) for s in a.stride())
    except Exception:  # (a stride from data: laid out as torch makes it, row-major)
        return None
    if None in strides or min(strides, default=0) < 0 or all(
            n == 1 or s == r for n, s, r in zip(shape, strides, views.row_major(shape))):
        return None
    return strides  # type: ignore[return-value]


def _hint(size: Any) -> int | None:
    """A size's value without a guard: an int as it is, a backed SymInt's hint, else None."""
    if isinstance(size, int):
        return size
    return getattr(getattr(size, "node", None), "hint", None)


def _torch_dtype(torch: Any, name: str) -> Any:
    return torch.bool if name == "bool" else getattr(torch, name)


def _pack(outs: list[Any], n: int) -> Any:
    return None if n == 0 else outs[0] if n == 1 else tuple(outs)
