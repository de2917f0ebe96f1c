"""Tensor arguments whose values host code reads: fla's `prepare_chunk_indices(cu_seqlens)`
sizes a grid from `cu_seqlens`' values (`torch.repeat_interleave`, `.tolist()`), vLLM's LoRA
wrapper returns early on `no_lora_flag_cpu.item()`, mamba's conv `np.diff(query_start_loc)`.

Host code that needs a value the trace does not have (a torch function with no tiledsl
counterpart, `.tolist()`, NumPy's conversion, iteration, `x.item()` as a Python bool or int)
of a tensor computed from small integer or bool arguments stops the trace with
`ValuesNeeded`: the kernel marks those parameters *valued* and traces again with each as a
real tensor holding the call's values (torch's where torch is loaded, on the arguments'
device), so the host code runs as torch runs it; what it makes and hands to a launch is a
captured tensor (captured.py). The trace is keyed by the values (a hash of their bytes):
every call reads them (a GPU tensor's, as the original wrapper does) and a call with other
values traces again. A kernel may not write a valued argument (its launches see a copy).
Only integer and bool tensors of at most `MAX_ELEMENTS` elements become valued, and 0-d
arrays a torch function tests (Liger's `torch.equal(grad_output, torch.tensor(1.0))`):
anything else keeps the error it had. A GPU argument's real tensor is made on its device.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tiledsl import dtypes
from tiledsl.errors import TraceError
from tiledsl.frontend.tracer import Tracer, current
from tiledsl.ir.core import Block, Op, Value
from tiledsl.ir.ops import WRITES, has_trait
from tiledsl.ir.types import TensorType
from tiledsl.ir.views import root

MAX_ELEMENTS = 1 << 16


class ValuesNeeded(BaseException):  # (as StaticNeeded: user code's `except Exception` skips it)
    def __init__(self, params: frozenset[str]) -> None:
        super().__init__(sorted(params))
        self.params = params


@dataclass(frozen=True, eq=False)
class Valued:
    """A valued argument's contents in a spec: keyed by shape, dtype, device and bytes."""

    array: np.ndarray = field(repr=False)
    gpu: int | None  # the CUDA device the call's array is on, None on the CPU

    @property
    def key(self) -> tuple:
        return ("values", self.gpu, self.array.shape, self.array.dtype.str,
                hashlib.sha1(self.array.tobytes()).hexdigest())

    @property
    def text(self) -> str:
        return f"values{self.array.shape}:{self.array.dtype.str}:{self.key[-1][:16]}"

    def proxy(self) -> Any:
        """What the kernel's code holds: a fresh tensor of these values, torch's on the
        device the call's arrays are on where torch is loaded, else NumPy's."""
        torch = sys.modules.get("torch")
        if torch is None:
            return self.array.copy()
        from tiledsl.interop.arrays import from_numpy  # (bfloat16 and fp8 through their bits)
        t = from_numpy(self.array.copy(), torch.empty(0))
        return t if self.gpu is None else t.cuda(self.gpu)


def may_be_valued(v: Any) -> bool:
    """Whether array argument `v` can be valued: integer or bool, of 1 to MAX_ELEMENTS
    elements, or a 0-d array of any dtype (a call with another kind of array traces it as a
    tensor)."""
    d = dtypes.from_any(str(getattr(v, "dtype", "")).rsplit(".", 1)[-1])
    if d is None or not hasattr(v, "shape"):
        return False
    if len(v.shape) == 0:
        return True
    return (d.is_int or d.is_bool) and 0 < int(np.prod(v.shape)) <= MAX_ELEMENTS


def need_scalar_values(values: list[Any]) -> None:
    """Where host code needs the values of tile values (a torch function of theirs tiledsl has
    no counterpart of): raise ValuesNeeded if all are 0-d array arguments (Liger's backward
    wrappers: `if torch.equal(grad_output, torch.tensor(1.0)):`); else return."""
    tr = current()
    names = [tr.array_scalars.get(v.value) for v in values]
    if names and all(n is not None for n in names):
        raise ValuesNeeded(frozenset(n for n in names if n is not None))


def need_values(tensors: list[Any]) -> None:
    """Where host code needs the values of `tensors` (Tensor proxies): raise ValuesNeeded for
    the arguments they are computed from, if all are small integer or bool tensors; else
    return, and the caller reports its error."""
    tr = current()
    params = set()
    for t in tensors:
        sources = _sources(tr, t.value)
        if sources is None:
            return
        for v in sources:  # (none: a tensor of constants, torch.arange(n)'s)
            ty, name = v.type, tr.arguments.get(v)
            if name is None or not isinstance(ty, TensorType) or not (
                    ty.dtype.is_int or ty.dtype.is_bool) or int(np.prod(ty.shape)) > MAX_ELEMENTS:
                return
            params.add(name)
    if params:
        raise ValuesNeeded(frozenset(params))


def _sources(tr: Tracer, v: Value) -> set[Value] | None:
    """The kernel's tensor arguments `v`'s contents derive from: through views, the ops that
    compute it, and the stores into a tensor the code allocated (host math writes its results
    so); None where a source is a runtime scalar argument."""
    writes: dict[Value, list[Op]] = {}
    inner: set[Value] = set()
    _index(tr.body, writes, inner)
    found: set[Value] = set()
    todo, seen = [v], set()
    while todo:
        x = todo.pop()
        if x in seen:
            continue
        seen.add(x)
        op = x.owner
        if op is None:
            if x in inner:  # a loop's index or carried value: what bounds it
                continue
            if not isinstance(x.type, TensorType):
                return None  # a runtime scalar argument
            found.add(x)
            continue
        todo += op.operands
        for region in op.regions:  # a loop's or a branch's results: what its body uses
            todo += [o for inner in _ops(region) for o in inner.operands]
        for w in writes.get(x, ()):
            todo += w.operands[1:]
    return found


def _ops(block: Block) -> list[Op]:
    return [o for op in block.ops for o in (op, *(i for r in op.regions for i in _ops(r)))]


def _index(block: Block, writes: dict[Value, list[Op]], inner: set[Value]) -> None:
    for op in block.ops:
        if has_trait(op.name, WRITES):
            writes.setdefault(root(op.operands[0]), []).append(op)
        for region in op.regions:
            inner.update(region.args)
            _index(region, writes, inner)


def refuse_writes(tr: Tracer, proxies: dict[int, str]) -> None:
    """A kernel that writes a valued argument (through a launch, which sees a copy): an error."""
    writes: dict[Value, list[Op]] = {}
    _index(tr.body, writes, set())
    for obj, t in tr.captured:
        name = proxies.get(id(obj))
        if name is not None and root(t.value) in writes:
            op = writes[root(t.value)][0]
            tr.fail(TraceError, f"the kernel writes '{name}', whose values its host code reads "
                    "(the trace holds them; its launches see a copy)", loc=op.loc,
                    hint="write into another tensor, or compute what the host code reads "
                         "from the values before the call")
