"""A kernel's config space for one argument spec and backend: a block size per tile loop (powers
of two up to the loop's extent, within td.register_block_size's bounds), each registered knob
(td.register_tunable), and the backend's own knobs and constraints."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from tiledsl.runtime import registry
from tiledsl.frontend import tunables
from tiledsl.runtime.arg_specs import ArgSpec
from tiledsl.frontend.block_sizes import bounded_choices, default_block
from tiledsl.runtime.config import Config, ConfigSpace, Param
from tiledsl.ir.core import Function
from tiledsl.ir.types import UNBOUNDED
from tiledsl.errors import ConfigError, TileDSLError
from tiledsl.runtime.runner import arch_key
from tiledsl.runtime.traces import Traced

if TYPE_CHECKING:
    from tiledsl.runtime.kernel import TileKernel


def space_for(k: TileKernel, spec: tuple[ArgSpec, ...], backend: str | None,
              arch: Any = None) -> ConfigSpace:
    """The config space of `k` for `spec` on `backend` (its knobs and constraints on `arch`),
    made once per key."""
    key = (spec, backend, arch_key(arch))
    if key not in k.caches.spaces:
        t = k.traces.get(spec)
        params = []
        for i, name in enumerate(t.ir.tunable_symbols()):  # (a tied one takes another's)
            sym = t.ir.symbols[name]
            top = _next_pow2(sym.extent)
            choices = tuple(1 << j for j in range(top.bit_length()))
            choices = bounded_choices(choices, sym.low, sym.high)  # register_block_size
            where = f" (line {sym.loc.line})" if sym.loc else ""
            over = "a runtime size" if sym.extent == UNBOUNDED else sym.extent
            doc = f"tile '{t.labels.get(sym.name, sym.name)}' over {over}{where}"
            params.append(Param(f"block_sizes[{i}]", choices, default_block(choices), doc))
        for name, fragment in t.tunables.items():  # td.register_tunable's knobs
            if name.startswith("block_sizes["):  # a block size host code reads: a param
                continue
            params.append(Param(name, fragment.choices, fragment.initial,
                                f"td.register_tunable({name!r}, {fragment})"))
        base = ConfigSpace(k.name, tuple(params))
        space = _extended(k, base, t, backend, arch)
        if t.tunables and backend is not None:  # each knob value's trace has its own
            space = tunables.per_trace(space, tuple(t.tunables), lambda config: _extended(
                k, base, k.traces.for_config(spec, config), backend, arch, pick=False))
            pick = getattr(registry.backend(backend), "pick_default", None)
            if pick is not None:  # over every knob value's trace (the default trace's own
                space = pick(space)  # search saw only its knob value's estimate)
        if k.pinned is not None and backend is not None:
            space = _pinned(k, space, t.ir)
        k.caches.spaces[key] = space
    return k.caches.spaces[key]


def _pinned(k: TileKernel, space: ConfigSpace, fn: Function) -> ConfigSpace:
    """`space` with the kernel's pinned config (`@td.tile_kernel(config=...)`) as its default,
    less the knobs this backend has not (warps and stages on NumPy). A pinned block size past
    a dimension that the largest choice already covers in one tile is that choice (Helion's
    longsum_manual pins 32768 for its 130000 columns: 3000 are one tile of 4096 as of 32768).
    A pin that does not fit is the space's `unfit`: the call that gives no config of its own
    fails with it."""
    c = k.pinned
    assert c is not None
    known = {p.name for p in space.params}
    knobs = {n: v for n, v in (("num_warps", c.num_warps), ("num_stages", c.num_stages),
                               *c.knobs) if v is not None and n in known}
    try:
        config = space.validate(Config(_covering(space, fn, c.block_sizes), **knobs))
    except ConfigError as e:
        return dataclasses.replace(space, unfit=ConfigError(
            f"@td.tile_kernel(config=...): {e.message}", kernel=k.name,
            hint="give one block size per tile loop, each one of its choices "
                 "(k.config_space(*args, backend=...) lists them), or pass config= to the call"))
    values = space.values(config)
    for param in space.params:  # (a pinnable value the search skips joins the choices)
        value = values[param.name]
        choices = param.choices if value in param.choices else (*param.choices, value)
        space = space.with_choices(param.name, choices, value)
    return space


def _covering(space: ConfigSpace, fn: Function, blocks: tuple[int, ...]) -> tuple[int, ...]:
    """`blocks` with each power of two past its param's largest choice, where that choice
    already covers the symbol's extent, as that choice."""
    params = {p.name: p for p in space.params}
    extents = [fn.symbols[s].extent for s in fn.tunable_symbols()]
    out = []
    for i, b in enumerate(blocks):
        p = params.get(f"block_sizes[{i}]")
        top = max(p.choices) if p is not None else None
        past = type(b) is int and b > 0 and not b & (b - 1) and top is not None and b > top
        out.append(top if past and i < len(extents) and top >= extents[i] else b)
    return tuple(out)


def _extended(k: TileKernel, space: ConfigSpace, t: Traced, backend: str | None,
              arch: Any, pick: bool = True) -> ConfigSpace:
    """`space` with `backend`'s knobs and constraints for trace `t` (and its default, unless
    not `pick`: a backend that searches for one may skip it)."""
    if backend is None:
        return space
    options: dict[str, Any] = ({} if arch is None else {"arch": arch}) | \
        ({} if pick else {"pick_default": False})
    try:
        return registry.backend(backend).extend_space(space, t.for_backend(backend),
                                                      **options)
    except TileDSLError as e:
        raise e.with_context(kernel=k.name) from None


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())
