"""`MyFunction.apply(x, ...)` of a `torch.autograd.Function` in a kernel's host code: its
`forward` traced as a helper.

Liger's and Unsloth's public entry points are autograd Functions whose `forward(ctx, ...)`
launches the Triton kernels. A tile kernel is a forward computation: `apply` runs `forward`
with a context that keeps what it is given (`ctx.save_for_backward(...)`, `ctx.BLOCK_SIZE =
...`) and records nothing for a backward; the kernel's outputs are not differentiable (as
`td.torch_op`'s are not). A Function whose `forward(*args)` takes no context (the
`setup_context` style) is called without one; its `setup_context` only prepares a backward, so it
is not called.
"""

from __future__ import annotations

import sys
from typing import Any, Callable


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


def apply(forward: Callable[..., Any], with_ctx: bool) -> Callable[..., Any]:
    """What a kernel calls for `MyFunction.apply`: `forward` (rewritten as a helper is)."""
    def call(*args: Any, **kwargs: Any) -> Any:
        if not with_ctx:
            return forward(*args, **kwargs)
        ctx = Context()
        ctx.needs_input_grad = tuple(False for _ in args)
        return forward(ctx, *args, **kwargs)
    return call
