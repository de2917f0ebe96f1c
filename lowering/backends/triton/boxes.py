"""Tensor descriptor boxes with fewer dimensions: a scalar-indexed dimension folded into the next.

Attention's `k[b, tk, :]` is a box of (1, BLOCK_TK, d) in a rank-3 descriptor. Where the batch
dimension is the next one repeated (`stride(0) == shape(1) * stride(1)`, a contiguous
(batch, seq) pair) and no box along the sequence reaches past its end, the same bytes are a box
of (BLOCK_TK, d) at row `b * seq + begin_tk` of a (batch*seq, d) descriptor: how the
hand-written kernels describe it (Triton's 06-fused-attention). One coordinate fewer per copy
matters on every key tile: under Triton 3.9 a rank-3 box costs two more uniform moves each trip
(sass_parity, d64 128x64 8 warps with TMA: 307 instructions per key tile against 305).

A box that may reach past its dimension's end is left alone: the rank-3 descriptor reads zeros
there, where the folded one would read the next batch's rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

INT32_MAX = 2**31 - 1  # TMA coordinates are 32-bit


@dataclass(frozen=True)
class BoxDim:
    """One dimension of a descriptor's tensor and of the box it copies."""

    extent: int
    stride: int  # in elements
    box: int
    coord: str  # the box's first index along it (a Triton expression)
    scalar: bool  # a scalar index (a box of 1 the tile does not have), known in range
    inside: bool  # every box along it lies within [0, extent)


def fold(dims: list[BoxDim]) -> list[BoxDim]:
    """`dims` with each scalar-indexed dimension folded into the next one where that addresses
    the same elements, keeping at least two dimensions (Triton's descriptors are rank 2-5)."""
    out = [dims[0]]
    for i, d in enumerate(dims[1:], start=1):
        last = out[-1]
        if (last.scalar and d.inside and last.stride == d.extent * d.stride
                and last.extent * d.extent <= INT32_MAX and len(out) + len(dims) - i > 2):
            coord = f"{_operand(last.coord)} * {d.extent}"
            out[-1] = replace(d, extent=last.extent * d.extent,
                              coord=coord if d.coord == "0" else f"{coord} + {d.coord}")
        else:
            out.append(d)
    return out


def _operand(expr: str) -> str:
    """`expr` as an operand of `*`: parenthesized unless a name or a number."""
    return expr if re.fullmatch(r"[\w.]+", expr) else f"({expr})"
