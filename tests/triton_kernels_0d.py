"""A @triton.jit kernel for tests/lang/test_atomics.py (Triton reads a kernel's source from its
file): FlagGems' vdot reduction, each program adding its partial sum into one scalar."""

import triton
import triton.language as tl


@triton.jit
def sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n).to(tl.float32)
    tl.atomic_add(out_ptr, tl.sum(x))


@triton.jit
def amax_kernel(input_ptr, amax_ptr, num_elements, input_dtype: tl.constexpr,
                BLOCK_SIZE: tl.constexpr):
    """torchao's float8 `_amax_atomic`: `tl.atomic_max` into the pointer's one element."""
    block_offs = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    vals = tl.load(input_ptr + block_offs, mask=block_offs < num_elements).to(input_dtype)
    tl.atomic_max(amax_ptr, tl.max(tl.abs(vals)))
