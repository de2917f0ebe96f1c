"""`MyFunction.apply(x, ...)` of a `torch.autograd.Function` in a kernel's host code: its
`forward` traced as a helper.

Liger's and Unsloth's public entry points are autograd Functions whose `forward(ctx, ...)`
launches the Triton kernels. `apply` runs `forward` with a context that keeps what it is given
(`ctx.save_for_backward(...)`, `ctx.BLOCK_SIZE = ...`) and records the call on the tracer
(`Applied`). A Function whose `forward(*args)` takes no context (the `setup_context` style) is
called without one. Where the kernel returns what one apply returns (`gradients`), its outputs
are differentiable (runtime/differentiable.py): the kernel's backward runs its host code again
with a `Backward` on the tracer, and the apply then also runs the Function's `setup_context`
(of that style) and `backward` on the gradients it is given.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable

from tiledsl.errors import TraceError
from tiledsl.frontend.tracer import active, current
from tiledsl.frontend.td_names import FUNCTIONS
from tiledsl.frontend.values import Tensor, TileValue


class Context:
    """What `forward(ctx, ...)` is given: attributes set on it stay; the calls a forward makes
    to prepare its backward are accepted and do nothing else."""

    needs_input_grad: tuple[bool, ...] = ()
    materialize_grads = True

    def save_for_backward(self, *tensors: Any) -> None:
        self.saved_tensors = tensors

    def mark_dirty(self, *tensors: Any) -> None:
        return None

    def mark_non_differentiable(self, *tensors: Any) -> None:
        return None

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = value


def forward_of(fn: Any) -> tuple[Callable[..., Any], bool] | None:
    """For `MyFunction.apply`, the Function's `forward` and whether it takes a context first;
    else None."""
    owner = getattr(fn, "__self__", None)
    module = sys.modules.get("torch.autograd.function")
    if getattr(fn, "__name__", None) != "apply" or not isinstance(owner, type) or module is None \
            or not issubclass(owner, module.Function):
        return None
    with_ctx = getattr(owner, "setup_context", None) is \
        getattr(module._SingleLevelFunction, "setup_context", None)
    return owner.forward, with_ctx


@dataclass
class Applied:
    """A `MyFunction.apply(...)` a trace made in host code: the Function, its positional
    inputs and its outputs (flattened)."""
    owner: type
    inputs: tuple[Any, ...]
    outputs: tuple[Any, ...]
    ctx: Context | None = None
    single: bool = False  # its forward returned one output, not a tuple


# What a context holds that is not the forward's: torch's bookkeeping
_BOOKKEEPING = frozenset({"saved_tensors", "needs_input_grad", "materialize_grads"})


@dataclass
class Backward:
    """What a backward trace (runtime/differentiable.py) gives the first `apply` it reaches:
    the gradients of its tensor outputs (in order) and the arguments that need one; `result`
    is what the Function's `backward` returned."""
    grads: list[Any]
    needs: frozenset[str]
    replay: Replay | None = None
    result: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class Replay:
    """A forward's context made from the kernel's arguments alone: the arguments it saved
    (by name) and its other attributes (Python values). A backward then needs no forward."""
    saved: tuple[str, ...]  # ("" for a None it saved: fla's optional initial state)
    attributes: tuple[tuple[str, Any], ...]
    # per output of the apply: ("tensor", shape, dtype name), or ("value", a Python value)
    outputs: tuple[tuple[Any, ...], ...]
    single: bool  # its forward returned one output, not a tuple

    @property
    def tensor_outputs(self) -> tuple[bool, ...]:
        """Which of the apply's outputs are tensors."""
        return tuple(o[0] == "tensor" for o in self.outputs)

    def stand_ins(self) -> Any:
        """What the apply returns where the backward replays it: new tensors of its outputs'
        shapes and dtypes (the host code after it may unpack them, `o, final_state =
        Fn.apply(...)` in fla's fused_recurrent_delta; what it computes from them is not the
        backward's result) and its other values."""
        made = tuple(FUNCTIONS["empty"](o[1], dtype=o[2]) if o[0] == "tensor" else o[1]
                     for o in self.outputs)
        return made[0] if self.single else made

    def context(self, tr: Any) -> Context:
        ctx = Context()
        proxies = {n: Tensor(v, n) for v, n in tr.arguments.items()} | \
            {n: TileValue(v) for v, n in tr.array_scalars.items()}
        ctx.saved_tensors = tuple(proxies[n] if n else None for n in self.saved)
        for name, value in self.attributes:
            setattr(ctx, name, value)
        return ctx


def apply(owner: type, forward: Callable[..., Any], with_ctx: bool,
          rewritten: Callable[[Any], Callable[..., Any]]) -> Callable[..., Any]:
    """What a kernel calls for `MyFunction.apply`: `forward` (rewritten as a helper is),
    recorded on the tracer; in a backward trace, the Function's `backward` too."""
    def call(*args: Any, **kwargs: Any) -> Any:
        tr = active()
        host = tr is not None and tr.depth == "host"
        backward = tr.backward if host and tr.backward is not None and \
            tr.backward.result is None else None
        needs = tuple(_needs(tr, a, backward) for a in args)
        if backward is not None and backward.replay is not None:  # its context, no forward
            ctx = backward.replay.context(tr)
            ctx.needs_input_grad = needs
            tr.applies.append(Applied(owner, args, ()))
            grads = iter(backward.grads)
            given = [next(grads) if t else None for t in backward.replay.tensor_outputs]
            backward.result = _results(rewritten(owner.backward)(ctx, *given))
            return backward.replay.stand_ins()
        ctx = Context()
        ctx.needs_input_grad = needs
        out = forward(ctx, *args, **kwargs) if with_ctx else forward(*args, **kwargs)
        if not host:
            return out
        outputs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        if not with_ctx and (backward is not None or owner_has_backward(owner)):
            rewritten(owner.setup_context)(ctx, args, out)  # (that style fills the context)
        tr.applies.append(Applied(owner, args, outputs, ctx,
                                  single=not isinstance(out, (tuple, list))))
        if backward is not None:
            grads = iter(backward.grads)
            given = [next(grads) if isinstance(o, Tensor) else None for o in outputs]
            backward.result = _results(rewritten(owner.backward)(ctx, *given))
        return out
    return call


def _results(result: Any) -> tuple[Any, ...]:
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def owner_has_backward(owner: type) -> bool:
    """Whether a Function defines its own backward."""
    module = sys.modules.get("torch.autograd.function")
    return module is not None and \
        getattr(owner, "backward", None) is not getattr(module.Function, "backward", None)


def _needs(tr: Any, v: Any, backward: Any) -> bool:
    """`ctx.needs_input_grad` of the apply's input `v`: in a backward trace, whether its
    gradient is asked for; in a forward, whether it is a kernel argument that requires grad in
    this call (the kernel traces once per answer, as for `x.requires_grad`: mamba3's forward
    saves its tensors only where `any(ctx.needs_input_grad)`)."""
    name = _source(tr, v) if tr is not None else None
    if backward is not None:
        return name in backward.needs
    if name is None:
        return False
    tr.grad_reads.add(name)
    return name in tr.grad_true


def _argument(tr: Any, v: Any) -> str | None:
    """The name of the kernel argument `v` is (itself, not a view of it; a 0-d tensor argument
    is a scalar here: PolyNorm's bias), else None."""
    if isinstance(v, Tensor):
        return tr.arguments.get(v.value)
    return tr.array_scalars.get(v.value) if isinstance(v, TileValue) else None


def _source(tr: Any, v: Any) -> str | None:
    """The name of the kernel argument `v` is, or that host code cast to make it
    (`Q.to(torch.bfloat16)`: mamba3's wrapper casts its inputs before its apply, and a
    gradient reaches Q through the cast, as torch's autograd takes it), else None."""
    name = _argument(tr, v)
    if name is None and isinstance(v, Tensor) and v.value in tr.host_casts:
        return _source(tr, Tensor(tr.host_casts[v.value], v.name))
    return name


@dataclass(frozen=True)
class Gradients:
    """How a kernel's outputs are one Function's: for each positional input of its `apply`,
    the kernel argument it is (None: not an argument tensor); for each tensor output of the
    apply, the kernel's returned tensor it is (its place among them); and the forward's
    context as a `Replay`, where it is made of the arguments alone."""
    inputs: tuple[str | None, ...]
    outputs: tuple[int, ...]
    replay: Replay | None = None


def gradients(tr: Any, returned: list[Any], returns: str) -> Gradients | None:
    """The kernel's outputs as one `apply`'s, where they are: the trace made one apply whose
    Function has a backward, the kernel returns its tensor outputs (as a tensor, or a tuple of
    them that may hold None and numbers too) and some input is a kernel argument. Else None:
    the outputs are not differentiable."""
    flat = returns in ("single", "tuple") or returns.startswith("tuple:") and \
        not any(c in returns for c in "[(")  # (None and numbers beside the tensors)
    if len(tr.applies) != 1 or not flat or not owner_has_backward(tr.applies[0].owner):
        return None
    applied = tr.applies[0]
    inputs = tuple(_source(tr, a) for a in applied.inputs)
    where = {id(t.value): i for i, t in enumerate(returned)}
    tensors = [o for o in applied.outputs if isinstance(o, Tensor)]
    if not any(inputs) or len(tensors) != len(returned) or \
            any(id(o.value) not in where for o in tensors):
        return None
    return Gradients(inputs, tuple(where[id(o.value)] for o in tensors), _replay(tr, applied))


def _replay(tr: Any, applied: Applied) -> Replay | None:
    """The forward's context as the arguments it saved and Python values, else None."""
    ctx = applied.ctx
    if ctx is None:
        return None
    saved = tuple("" if t is None else _argument(tr, t)  # ("": a None it saved)
                  for t in getattr(ctx, "saved_tensors", ()))
    attributes = tuple(sorted((k, v) for k, v in vars(ctx).items() if k not in _BOOKKEEPING))
    if None in saved or not all(_plain(v) for _, v in attributes):
        return None
    try:
        hash(attributes)
    except TypeError:
        return None
    outputs = tuple(("tensor", tuple(o.shape), o.dtype.name) if isinstance(o, Tensor) else
                    ("value", o) for o in applied.outputs)
    if not all(isinstance(d, int) for o in outputs if o[0] == "tensor" for d in o[1]) or \
            not all(_plain(o[1]) for o in outputs if o[0] == "value"):
        return None  # (symbolic sizes, or an output the backward cannot stand in for)
    return Replay(saved, attributes, outputs, applied.single)  # type: ignore[arg-type]


def _plain(v: Any) -> bool:
    """A Python value a backward can be traced with again (no proxy of this trace)."""
    if isinstance(v, (tuple, list)):
        return all(_plain(x) for x in v)
    return v is None or isinstance(v, (bool, int, float, str)) or type(v).__module__ in (
        "torch", "tiledsl.dtypes") and not hasattr(v, "shape")


def backward_begin(grads: list[Any], needs: tuple[str, ...], replay: tuple | None) -> None:
    """The start of a kernel's backward (runtime/differentiable.py), which then runs the
    kernel's host code again: its `apply` also runs the Function's backward on `grads`, after
    its forward or, given a `replay` (its fields, a compile-time argument), instead of it."""
    current().backward = Backward(list(grads), frozenset(needs),
                                  None if replay is None else Replay(*replay))


def backward_end(kernel: str) -> tuple[Any, ...]:
    """The gradients that backward gave the apply's inputs that are kernel arguments, in
    order."""
    tr = current()
    result = tr.backward.result
    if result is None:
        tr.fail(TraceError, f"the backward of kernel '{kernel}' ran its host code again, which "
                "called no torch.autograd.Function's apply this time")
    applied = tr.applies[0]
    return tuple(_as_tensor(g) for a, g in zip(applied.inputs,
                                               result + (None,) * len(applied.inputs))
                 if _source(tr, a) is not None)  # (a cast's gradient in its dtype: torch's
    # autograd casts it to the argument's)


def _as_tensor(g: Any) -> Any:
    """A gradient the backward computed as a runtime scalar (a 0-d argument's): a 0-d tensor,
    as the kernel returns it."""
    return FUNCTIONS["full"]((), g, g.dtype) if isinstance(g, TileValue) else g
