"""NumPy array subclasses as kernel arguments: each is passed as the plain ndarray it views, or
refused with an ArgumentError.

`np.matrix` keeps two dimensions when indexed and makes `*` a matrix product, so the NumPy
backend, which indexes and multiplies the arrays it is given, would fail deep inside NumPy or
compute something else. A plain view shares the subclass's memory (a `np.memmap`'s file, a
matrix's buffer), so a kernel that writes an argument in place writes the caller's object. A
masked array is refused: a kernel reads every element, masked or not.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from tiledsl.errors import ArgumentError


def plain_arrays(kernel: str, names: Iterable[str], values: list[Any]) -> list[Any]:
    """`values` (of the parameters `names`) with ndarray subclasses, also in lists and
    tuples, viewed as ndarrays."""
    for v in values:  # (a loop, not any(...): this runs on every call)
        if type(v) is not np.ndarray and _has_subclass(v):
            break
    else:
        return values
    names = list(names)
    return [_plain(kernel, n, v) for n, v in zip(names, values)] + values[len(names):]


def _has_subclass(v: Any) -> bool:
    if isinstance(v, (list, tuple)):
        return any(_has_subclass(x) for x in v)
    return isinstance(v, np.ndarray) and type(v) is not np.ndarray


def _plain(kernel: str, name: str, v: Any) -> Any:
    if isinstance(v, (list, tuple)) and _has_subclass(v):
        return type(v)(_plain(kernel, f"{name}[{i}]", x) for i, x in enumerate(v))
    if not isinstance(v, np.ndarray) or type(v) is np.ndarray:
        return v
    if isinstance(v, np.ma.MaskedArray):
        raise ArgumentError(f"argument '{name}' is a masked array (numpy.ma): a kernel reads "
                            "every element, masked or not", kernel=kernel,
                            hint="pass x.filled(value), or the data and the mask as two arrays "
                                 "(td.where(mask, ...) in the kernel)")
    return v.view(np.ndarray)
