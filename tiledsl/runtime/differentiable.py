"""A kernel call whose outputs torch can differentiate: the kernel's host code returns what one
`torch.autograd.Function`'s `apply` returns (Liger's and Unsloth's entry points, attorch's
layers, a TritonBench test's `out.sum().backward()`), so its backward is that Function's.

Called with torch tensors that require grad, with grad enabled, such a kernel runs inside a
torch autograd node (`_node`); writes into its arguments are then the Function's own, as in
its torch forward (Liger's cross entropy stores its gradient into the logits). Its backward is
a second tile kernel per number of output gradients (`backward_kernel`): the kernel's host code
run again on the same arguments, whose `apply` then runs the Function's `backward` on the
gradients (frontend/autograd_functions.py). Where the forward's context holds only arguments
(`ctx.save_for_backward(x, w)`) and Python values, the backward builds it from them and runs
no forward; else the forward runs again first (as activation checkpointing recomputes one),
which a forward that writes its arguments cannot: its backward is then an error.

Only the gradients of the apply's inputs that are the kernel's own tensor arguments flow back
(a view made in host code before the apply has none); a kernel whose outputs are not one apply's
(two applies, an output changed after it) runs as before: its outputs are not differentiable.
The output gradients reach the backward contiguous (`y.sum()`'s is a stride-0 expansion).
"""

from __future__ import annotations

import sys
from dataclasses import astuple
from typing import Any

from tiledsl.errors import TraceError, warn
from tiledsl.frontend.autograd_functions import Gradients, backward_begin, backward_end
from tiledsl.runtime.generated import kernel_from_source
from tiledsl.runtime.runner import grad_writes_allowed
from tiledsl.runtime.traces import with_grads


def wanted(values: list[Any]) -> bool:
    """Whether a call's gradients may be wanted: a torch tensor argument requires grad with
    grad enabled."""
    torch = sys.modules.get("torch")
    return torch is not None and torch.is_grad_enabled() and any(
        getattr(v, "requires_grad", False) is True and type(v).__module__.startswith("torch")
        for v in values)


def call(kernel: Any, values: list[Any]) -> Any:
    """The kernel's outputs on `values`, differentiable where they are one Function's (else
    NotImplemented: the caller runs it as before). A CUDA layout found not differentiable is
    remembered, so its later calls take the fast path at once."""
    kernel._reads.sync(kernel)
    key = kernel.fast_key(values)
    if key is not None and key in kernel.caches.plain:
        return NotImplemented
    spec = kernel.arg_spec(_specced(kernel, values))
    grads = kernel._grads(values, spec)
    with with_grads(grads):
        traced = kernel.traces.get(spec)
    gradients = traced.gradients
    if gradients is None:
        if key is not None:
            kernel.caches.plain.add(key)
        if traced.applies:
            _not_differentiable(kernel.name, traced.applies)
        return NotImplemented
    names = list(kernel.signature.parameters)
    slots = tuple(names.index(n) for n in dict.fromkeys(n for n in gradients.inputs if n))
    return _node().apply(kernel, values, gradients, slots, *(values[i] for i in slots))


def _not_differentiable(kernel: str, applies: tuple[str, ...]) -> None:
    """Say, once per kernel and Functions, that a call whose arguments require grad gets
    outputs with no grad_fn although its code applied an autograd Function (a `.backward()`
    through them would fail, or a gradient be missing, with no word from tiledsl)."""
    names = ", ".join(f"{n}.apply" for n in dict.fromkeys(applies))
    warn(f"kernel '{kernel}' calls {names}, but its outputs are not what one apply returns "
         "(host math on them, views of them, or several applies), so they have no grad_fn: "
         "torch sees no gradient through them; return what one `Fn.apply(...)` returns (None "
         "and numbers may sit beside its outputs) and do the rest outside the kernel, or call "
         "the undecorated function under `with td.triton_launches():` (its launches through "
         "tiledsl, its host code and autograd as they are)")


_NODE: Any = None


def _node() -> Any:
    """The autograd Function every such call is a node of (made once torch is imported)."""
    global _NODE
    if _NODE is None:
        import torch

        class KernelNode(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, kernel: Any, values: list[Any], gradients: Gradients,
                        slots: tuple[int, ...], *tensors: Any) -> Any:
                with grad_writes_allowed():  # (as in the Function's own forward: Liger's
                    out = kernel._call(values)  # cross entropy writes its input's gradient)
                ctx.kernel, ctx.gradients, ctx.slots = kernel, gradients, slots
                ctx.values = [None if i in slots else v for i, v in enumerate(values)]
                ctx.save_for_backward(*tensors)
                outputs = out if isinstance(out, tuple) else (out,)
                tensors = [i for i, o in enumerate(outputs) if isinstance(o, torch.Tensor)]
                ctx.tensors = tensors  # (the outputs' places: None and numbers beside them)
                ctx.mark_non_differentiable(*(outputs[i] for i in tensors
                                              if not outputs[i].is_floating_point()))
                return out

            @staticmethod
            def backward(ctx: Any, *grads: Any) -> Any:
                return (None, None, None, None, *_backward(ctx, grads))

        _NODE = KernelNode
    return _NODE


def _backward(ctx: Any, grads: tuple[Any, ...]) -> list[Any]:
    """The gradients of the node's tensor inputs: the backward kernel on the saved arguments
    and the gradients of the apply's outputs."""
    kernel, gradients = ctx.kernel, ctx.gradients
    values = list(ctx.values)
    for i, t in zip(ctx.slots, ctx.saved_tensors):  # (as the forward had them: its
        values[i] = t  # `x.requires_grad` reads answer as they did there)
    written = kernel.traces.written(kernel.arg_spec(_specced(kernel, values)))
    if written and gradients.replay is None:
        raise TraceError(f"kernel '{kernel.name}' writes its argument{'s' * (len(written) > 1)} "
                         f"{', '.join(written)}: its backward, which runs the forward again "
                         "(as activation checkpointing does), would read what the forward "
                         "wrote", kernel=kernel.name,
                         hint="call the Function's backward yourself, as its own kernel")
    names = list(kernel.signature.parameters)
    needs = tuple(sorted(names[i] for i, n in zip(ctx.slots, ctx.needs_input_grad[4:]) if n))
    given = [grads[ctx.tensors[j]].contiguous() for j in gradients.outputs]
    replay = None if gradients.replay is None else astuple(gradients.replay)
    with grad_writes_allowed():  # (a backward may write them: Liger's swiglu writes its
        got = backward_kernel(kernel, len(given))(*values, *given, needs, replay)  # gradients
        # into its inputs, as on a GPU)
    got = got if isinstance(got, tuple) else (got,)
    by_name = {n: g for n, g in zip([n for n in gradients.inputs if n], got) if g is not None}
    return [by_name.get(names[i]) if names[i] in needs else None for i in ctx.slots]


def _specced(kernel: Any, values: list[Any]) -> list[Any]:
    """`values` as the kernel's argument specs take them: CPU tensors as NumPy views."""
    on_gpu = any(getattr(v, "is_cuda", False) is True for v in values)
    return values if on_gpu else kernel.numpy_views(values)


def backward_kernel(kernel: Any, grads: int) -> Any:
    """The tile kernel of `kernel`'s backward for `grads` output gradients (made once):
    `def <name>_backward(<its parameters>, _td_grad_0, ..., _td_needs, _td_replay)` running
    its host code again (autograd_functions.backward_begin)."""
    made = kernel.__dict__.setdefault("_td_backward", {})
    if grads in made:
        return made[grads]
    params = list(kernel.signature.parameters.values())
    given = [f"_td_grad_{i}" for i in range(grads)]
    args = ", ".join(f"{p.name}={p.name}" if p.kind == p.KEYWORD_ONLY else p.name
                     for p in params)
    name = f"{kernel.name}_backward"
    file = f"<tiledsl: the backward of kernel '{kernel.name}'>"
    source = (f"def {name}({', '.join([p.name for p in params] + given)}, _td_needs, "
              f"_td_replay):\n"
              f"    tiledsl_backward_begin([{', '.join(given)}], _td_needs, _td_replay)\n"
              f"    tiledsl_kernel({args})\n"
              f"    return tiledsl_backward_end({kernel.name!r})\n")
    made[grads] = kernel_from_source(type(kernel), name, source, file, {
        "tiledsl_backward_begin": backward_begin, "tiledsl_backward_end": backward_end,
        "tiledsl_kernel": kernel})
    return made[grads]
