"""`x.item()` of a one-element tensor in host code: a number of the kernel's data, as Liger's
cross entropy counts the labels it keeps, `n_non_ignore = target_mask.sum().item()`, and
passes the count to its Triton kernel, which divides the loss by it.

The kernel is traced without its data, so the number is not known while tracing: `HostScalar`
stands for it. Given to a runtime parameter of a launch, or used in grid code, it is a load of
the element in each program, so the value is read on the device when the programs run, with
no copy to the host. Arithmetic on it in host code stays such a number (host math on the
one-element tensor). What needs the value while tracing (an `if`, `int()`, a shape, a
`tl.constexpr`) is an error at that line. An `assert` on it in host code is checked where the
kernel runs, as a device assertion (tiledsl/lang/host_asserts.py).
"""

from __future__ import annotations

from typing import Any

from tiledsl.errors import TraceError
from tiledsl.frontend.tracer import current
from tiledsl.frontend.valued_args import need_values


class HostScalar:
    """The value of one-element tensor `tensor` (see the module's docstring)."""

    def __init__(self, tensor: Any) -> None:
        self.tensor = tensor

    def load(self) -> Any:
        """The value, read by the program being traced (a grid's)."""
        tr = current()
        if tr.depth == "host":
            self.fail("in host code")
        return self.tensor[(0,) * self.tensor.ndim if self.tensor.ndim else ()]

    def fail(self, what: str) -> Any:
        if current().depth == "host" and what != "in host code":  # a small argument's value
            need_values([self.tensor])  # (vLLM's `if no_lora_flag_cpu.item(): return`)
        current().fail(TraceError, f"{self.tensor.name}.item() is used {what}: its value is the "
                       "kernel's data, read on the device when the programs run, not known "
                       "while the kernel traces",
                       hint="pass it to a runtime (not tl.constexpr) parameter of a launch or "
                            "use it inside the grid, or pass the number as an argument")

    def _math(self, name: str, *others: Any) -> Any:
        if current().depth != "host":  # grid code: the loaded value's arithmetic
            return getattr(self.load(), name)(*others)
        result = getattr(self.tensor, name)(*(o.tensor if isinstance(o, HostScalar) else o
                                              for o in others))
        return HostScalar(result)

    def __bool__(self) -> bool:
        return self.fail("as a Python truth value (an `if`, `and`, `or`)")

    def __int__(self) -> int:
        return self.fail("as a Python int")

    def __float__(self) -> float:
        return self.fail("as a Python float")

    def __index__(self) -> int:
        return self.fail("as an index or size")

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"{self.tensor.name}.item()"


def _method(name: str) -> Any:
    def method(self: HostScalar, *others: Any) -> Any:
        return self._math(name, *others)
    method.__name__ = name
    return method


# the operators host math computes on tensors (lang/host_math.py); others are Python's TypeError
for _name in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "floordiv",
              "rfloordiv", "mod", "rmod", "neg", "abs", "lt", "le", "gt", "ge", "eq", "ne"):
    setattr(HostScalar, f"__{_name}__", _method(f"__{_name}__"))
