"""Knobs a kernel registers and reads: `split_k = td.register_tunable("split_k",
td.PowerOfTwo(1, 32))`, as Helion's `hl.register_tunable`.

The knob joins the kernel's config space (a param named like it, searched by the tuner as any
other) and the body reads its value as a Python int while it traces. Configs are applied after
tracing, so a knob's value is a compile-time value of the trace: the kernel is traced once per
value the knob takes (the trace cache keys on it); the default trace gives the space. A config
that sets the knob gets the trace for its value, on every backend, in `k.source`, `k.compile`
and `k.simulate` alike. The backends' constraints and cost estimates of such a config are
those of its own trace.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from tiledsl.runtime.config import Config, ConfigSpace, Constraint
from tiledsl.errors import TraceError, user_loc
from tiledsl.frontend.tracer import current

RESERVED = ("block_sizes", "num_warps", "num_stages")


@dataclass(frozen=True)
class PowerOfTwo:
    """The powers of two from `low` to `high` (Helion's `PowerOfTwoFragment`); the default is
    `default`, else `low`."""

    low: int
    high: int
    default: int | None = None

    def __post_init__(self) -> None:
        for v in (self.low, self.high):  # (a compile-time int of the kernel is an int too)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1 or v & (v - 1):
                raise TraceError(f"td.PowerOfTwo({self.low}, {self.high}): bounds must be "
                                 "powers of two", loc=user_loc())
        if self.low > self.high or (self.default is not None and self.default not in
                                    self.choices):
            raise TraceError(f"td.PowerOfTwo({self.low}, {self.high}, default={self.default}): "
                             "needs low <= default <= high", loc=user_loc())

    @property
    def choices(self) -> tuple[int, ...]:
        return tuple(1 << i for i in range(self.low.bit_length() - 1, self.high.bit_length()))

    @property
    def initial(self) -> int:
        return self.low if self.default is None else self.default


@dataclass(frozen=True)
class Choice:
    """One of `values` (bools, ints, floats or strings: Helion's `EnumFragment`); the default
    is `default`, else the first."""

    values: tuple[Any, ...]
    default: Any = None

    def __post_init__(self) -> None:
        if not self.values or not all(isinstance(v, (bool, int, float, str))
                                      for v in self.values):
            raise TraceError(f"td.Choice({self.values!r}): give a non-empty tuple of bools, "
                             "ints, floats or strings", loc=user_loc())

    @property
    def choices(self) -> tuple[Any, ...]:
        return tuple(self.values)

    @property
    def initial(self) -> Any:
        return self.values[0] if self.default is None else self.default


Fragment = PowerOfTwo | Choice


def register_tunable(name: str, fragment: Fragment) -> Any:
    """Add knob `name` taking the values of `fragment` to the kernel's config space; returns
    the value of the config being traced (a Python value: use it in host code, shapes, block
    sizes, ranges)."""
    tr = current("td.register_tunable()")
    if not isinstance(name, str) or not name.isidentifier() or name in RESERVED:
        tr.fail(TraceError, f"td.register_tunable(): the knob's name must be an identifier other "
                f"than {', '.join(RESERVED)}, got {name!r}")
    if not isinstance(fragment, (PowerOfTwo, Choice)):
        tr.fail(TraceError, f"td.register_tunable({name!r}, ...): the choices are a "
                f"td.PowerOfTwo(low, high) or a td.Choice(values), got {fragment!r}")
    known = tr.tunables.get(name)
    if known is not None and known != fragment:
        tr.fail(TraceError, f"td.register_tunable({name!r}, ...) registers the knob again with "
                f"other choices ({fragment} after {known})")
    tr.tunables[name] = fragment
    value = tr.knobs.get(name, fragment.initial)
    if value not in fragment.choices:
        tr.fail(TraceError, f"knob {name!r} = {value!r} is not one of {list(fragment.choices)}")
    return value


def per_trace(space: ConfigSpace, names: tuple[str, ...],
              extend: Callable[[Config], ConfigSpace]) -> ConfigSpace:
    """`space` (a backend's, for the default trace) whose constraints, redundancy rules and
    estimate are, for each config, those the backend gives the trace of its knob values
    (`extend(config)`, made once per value)."""
    made: dict[tuple, ConfigSpace] = {}

    def own(config: Config) -> ConfigSpace:
        key = tuple(config.get(n) for n in names)
        if key not in made:
            made[key] = extend(config)
        return made[key]

    def constraint(config: Config) -> str | None:
        return next((why for c in own(config).constraints if (why := c.check(config))), None)

    def redundant(config: Config) -> str | None:
        return next((why for c in own(config).redundant if (why := c.check(config))), None)

    out = dataclasses.replace(
        space, constraints=(Constraint("the backend's constraints for the trace of these knob "
                                       "values", constraint),),
        redundant=(Constraint("redundant", redundant),))
    if space.estimate is not None:
        out = out.with_estimate(lambda config: own(config).estimate(config))  # type: ignore[misc]
    return out


def cdiv(a: int, b: int) -> int:
    """`ceil(a / b)` of two ints (Helion's `helion.cdiv`), for host code: tile counts; as
    Triton's `tl.cdiv`, `(a + b - 1) // b`, so that in a @triton.jit body, whose runtime
    scalars divide toward zero (runtime_ints.py), it is Triton's too."""
    return (a + b - 1) // b


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n (Helion's `helion.next_power_of_2`): a block size."""
    return 1 << max(0, int(n) - 1).bit_length()
