"""Padding of constant tile dimensions in the Triton backend.

Triton's tiles are powers of two, so a constant dimension of d elements is held in
`padded(d)` lanes (the extra lanes masked). `tl.dot` also needs every dimension to be at least
16, and K at least 32 for 8-bit operands: the dot rule widens a smaller operand axis with zero lanes and narrows its result back
(`widen`, `narrow`), using only joins, splits, permutes and reshapes, which move no data between
threads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lowering.backends.triton.emit import KernelEmitter

MMA_MIN = 16  # tl.dot's smallest M, N and K
MMA_MIN_K8 = 32  # its smallest K for 8-bit operands (fp8, int8): sm_90's wgmma takes K >= 32


def mma_min(bits: int, axis: str) -> int:
    """tl.dot's smallest extent of `axis` ("m", "n" or "k") for operands of `bits` bits."""
    return MMA_MIN_K8 if axis == "k" and bits == 8 else MMA_MIN


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def padded(d: int) -> int:
    """The lanes a constant dimension of d elements is held in: the next power of two."""
    return next_pow2(d)


def _to_last(em: KernelEmitter, x: str, axis: int, rank: int, indent: int) -> str:
    if axis == rank - 1:
        return x
    perm = tuple(a for a in range(rank) if a != axis) + (axis,)
    name = em.namer.fresh("moved")
    em.emit(indent, f"{name} = tl.permute({x}, {perm})")
    return name


def _from_last(em: KernelEmitter, x: str, axis: int, rank: int, indent: int) -> str:
    if axis == rank - 1:
        return x
    perm = tuple(range(axis)) + (rank - 1,) + tuple(range(axis, rank - 1))
    name = em.namer.fresh("moved")
    em.emit(indent, f"{name} = tl.permute({x}, {perm})")
    return name


def widen(em: KernelEmitter, x: str, dims: list[str], axis: int, n: int, m: int,
          indent: int) -> str:
    """`x` (dimension expressions `dims`) with axis `axis` grown from n to m lanes (powers of
    two), the new lanes zero: each step joins zeros and lays them after the data."""
    rank = len(dims)
    rest = [d for i, d in enumerate(dims) if i != axis]
    y = _to_last(em, x, axis, rank, indent)
    swap = tuple(range(rank - 1)) + (rank, rank - 1)
    while n < m:
        name = em.namer.fresh("wide")
        shape = ", ".join(rest + [str(2 * n)])
        em.emit(indent, f"{name} = tl.reshape(tl.permute(tl.join({y}, tl.zeros_like({y})), "
                        f"{swap}), ({shape},))")
        y, n = name, 2 * n
    return _from_last(em, y, axis, rank, indent)


def narrow(em: KernelEmitter, x: str, dims: list[str], axis: int, m: int, n: int,
           indent: int) -> str:
    """`x` with axis `axis` cut from m lanes to its first n (powers of two): the axis is
    viewed as (m / n, n) and permuted to (n, m / n), whose first column halving splits keep."""
    rank = len(dims)
    rest = [d for i, d in enumerate(dims) if i != axis]
    y = _to_last(em, x, axis, rank, indent)
    k = m // n
    name = em.namer.fresh("cut")
    em.emit(indent, f"{name} = tl.permute(tl.reshape({y}, ({', '.join(rest + [str(k), str(n)])},)), "
                    f"{tuple(range(rank - 1)) + (rank, rank - 1)})")
    y = name
    while k > 1:
        name = em.namer.fresh("cut")
        shape = ", ".join(rest + [str(n), str(k // 2), "2"])
        em.emit(indent, f"{name}, _ = tl.split(tl.reshape({y}, ({shape},)))")
        y, k = name, k // 2
    name = em.namer.fresh("cut")
    em.emit(indent, f"{name} = tl.reshape({y}, ({', '.join(rest + [str(n)])},))")
    return _from_last(em, name, axis, rank, indent)
