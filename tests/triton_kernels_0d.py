"""A @triton.jit kernel for tests/lang/test_atomics.py (Triton reads a kernel's source from its
file): FlagGems' vdot reduction, each program adding its partial sum into one scalar."""

import triton
import triton.language as tl


@triton.jit
def sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n).to(tl.float32)
    tl.atomic_add(out_ptr, tl.sum(x))
