"""`tl.inline_asm_elementwise` under Triton's interpreter, which has none (`inline_asm not
supported in interpreter mode`): while an interpreted kernel runs (interpret.interpreted_stdlib),
the interpreter's builder runs the assembly as the NumPy backend does
(lowering/backends/numpy/ptx.py), on its arrays. The interpreter holds bfloat16 and float8 as
their bits (uint16, uint8): they are viewed as ml_dtypes' types for the run, and back."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from lowering.backends.numpy import ptx
from tiledsl.errors import BackendError


class _Results:
    """What the builder's `create_inline_asm` returns: its results by index."""

    def __init__(self, handles: list[Any]) -> None:
        self.handles = handles

    def get_result(self, i: int) -> Any:
        return self.handles[i]


def _dtype(tl_dtype: Any) -> np.dtype:
    import triton.language as tl
    from triton.runtime.interpreter import _get_np_dtype
    special = {tl.bfloat16: ml_dtypes.bfloat16, tl.float8e4nv: ml_dtypes.float8_e4m3fn,
               tl.float8e5: ml_dtypes.float8_e5m2}
    return np.dtype(special.get(tl_dtype, _get_np_dtype(tl_dtype)))


def create_inline_asm(builder: Any, asm: str, constraints: str, values: list[Any],
                      types: list[Any], is_pure: bool, pack: int) -> _Results:
    from triton.runtime.interpreter import TensorHandle, _get_np_dtype
    outs = [getattr(t, "scalar", t) for t in types]  # (a block type's element type)
    args = [np.asarray(v.data).view(_dtype(v.dtype)) for v in values]
    try:
        data = ptx.run(asm, args, [_dtype(d) for d in outs], pack)
    except ptx.PtxError as e:
        raise BackendError(f"td.inline_asm_elementwise(): {e}", hint=ptx.HINT) from None
    return _Results([TensorHandle(np.ascontiguousarray(d).view(_get_np_dtype(t)), t)
                     for d, t in zip(data, outs)])
