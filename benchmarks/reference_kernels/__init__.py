"""Hand-written Triton kernels, written the way the best public ones are, to hold tiledsl's
generated code against (`benchmarks/sass_parity.py`).

Each module binds its kernel to torch tensors and a `td.Config` (the same block sizes, warps and
stages tiledsl takes) and returns a `Launch`: on a GPU `launch.run()` runs it; on any machine
`aot_signature(launch)` gives what `triton.compile(ASTSource(...))` needs to compile exactly what
that launch would, from torch `meta` tensors, without a GPU. `load(name, interpret=True)` gives
the kernels for Triton's interpreter on CPU tensors (run them under lowering's
`interpreted_stdlib()`), which tests/backends/triton/test_sass_parity.py checks against the examples' NumPy.

    from reference_kernels import gemm
    launch = gemm.bind(a, b, td.Config((128, 256, 64), 8, 3, group_m=8), tma=True)
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from lowering.backends.triton.loader import interpreting

TRITON_DTYPES = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}


@dataclass(frozen=True)
class Launch:
    """One launch of a reference kernel: every parameter by name, the grid and the options."""

    kernel: Any  # a triton JITFunction
    grid: tuple[int, ...]
    args: dict[str, Any]  # tensors, TensorDescriptors, ints, floats and constexprs, by name
    num_warps: int
    num_stages: int
    out: Any  # the tensor the launch writes

    def run(self) -> Any:
        self.kernel[self.grid](**self.args, num_warps=self.num_warps, num_stages=self.num_stages)
        return self.out


def dtype_name(tensor: Any) -> str:
    """Triton's short name (fp16, bf16, fp32) of a torch tensor's dtype."""
    return TRITON_DTYPES[str(tensor.dtype).removeprefix("torch.")]


def _arg_type(value: Any) -> tuple[str, bool]:
    """(Triton signature type, divisible by 16) of one runtime argument."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    if isinstance(value, TensorDescriptor):
        box = ", ".join(map(str, value.block_shape))
        return f"tensordesc<{dtype_name(value.base)}[{box}]>", False
    if hasattr(value, "data_ptr"):
        return "*" + dtype_name(value), True  # torch allocations are 16-byte aligned
    if isinstance(value, bool):
        return "i1", False
    if isinstance(value, int):
        return ("i32" if -2**31 <= value < 2**31 else "i64"), value % 16 == 0
    if isinstance(value, float):
        return "fp32", False
    raise TypeError(f"no Triton signature type for {type(value).__name__}")


def aot_signature(launch: Launch) -> tuple[dict[str, str], dict[str, Any], dict[tuple, list]]:
    """ASTSource's signature, constexprs and attrs for `launch`, specialized as Triton's JIT
    specializes a launch: constexpr parameters, None and ints equal to 1 become constants;
    pointers and ints that are multiples of 16 get a divisibility hint."""
    sig: dict[str, str] = {}
    consts: dict[str, Any] = {}
    attrs: dict[tuple, list] = {}
    for i, p in enumerate(launch.kernel.params):
        value = launch.args[p.name]
        one = type(value) is int and value == 1 and not p.do_not_specialize
        if p.is_constexpr or value is None or one:
            sig[p.name] = "constexpr"
            consts[p.name] = value
            continue
        sig[p.name], divisible = _arg_type(value)
        if divisible and not p.do_not_specialize:
            attrs[(i,)] = [["tt.divisibility", 16]]
    return sig, consts, attrs


def load(name: str, *, interpret: bool) -> ModuleType:
    """reference_kernels/<name>.py imported afresh, its kernels for Triton's interpreter (CPU
    tensors) or for compiling: `@triton.jit` reads TRITON_INTERPRET when it decorates."""
    key = f"reference_kernels_{name}_{'interp' if interpret else 'gpu'}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, Path(__file__).parent / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    with interpreting(interpret):
        spec.loader.exec_module(module)
    return module
