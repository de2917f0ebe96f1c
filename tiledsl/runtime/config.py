"""Configs (block sizes and backend knobs) and the finite config space the compiler derives."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import math
import numbers
import random
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from tiledsl.runtime import search
from tiledsl.errors import ArgumentError, ConfigError

# Spaces with constraints whose product has more points than this are not enumerated: `len`
# says so, `default` and `sample` search near the defaults (tiledsl/runtime/search.py). About 25 us a
# point for Triton's constraints: the limit counts in about 6 s.
COUNT_LIMIT = 250_000


@dataclass(frozen=True, init=False)
class Config:
    """One point of a kernel's config space: hashable, JSON round-trip.

    `block_sizes` has one entry per tunable tile dimension, in the order the kernel creates them.
    """

    block_sizes: tuple[int, ...]
    num_warps: int | None
    num_stages: int | None
    knobs: tuple[tuple[str, Any], ...]

    def __init__(self, block_sizes: Any = (), num_warps: int | None = None,
                 num_stages: int | None = None, **knobs: Any) -> None:
        # Searches build hundreds of thousands of these: the checks stay cheap.
        if type(block_sizes) is int:
            block_sizes = (block_sizes,)
        if not isinstance(block_sizes, (tuple, list)) or \
                not all(type(b) is int for b in block_sizes):
            raise ConfigError(f"block_sizes must be a tuple of ints, got {block_sizes!r}")
        for name, value in (("num_warps", num_warps), ("num_stages", num_stages)):
            if value is not None and type(value) is not int:
                raise ConfigError(f"{name} must be an int, got {value!r}")
        for name, value in knobs.items():
            if not _knob_value(value):
                raise ConfigError(f"knob {name!r} must be a bool, int, float, string or None, "
                                  "or a list of them (a finite float: configs are hashable "
                                  f"and JSON), got {value!r}")
            if isinstance(value, (list, tuple)):  # (Helion's `reduction_loops=[None]`)
                knobs[name] = _frozen(value)
        self.__dict__.update(block_sizes=tuple(block_sizes), num_warps=num_warps,
                             num_stages=num_stages, knobs=tuple(sorted(knobs.items())))

    def get(self, name: str, default: Any = None) -> Any:
        if name in ("block_sizes", "num_warps", "num_stages"):
            value = getattr(self, name)
            return default if value is None else value
        i = _block_index(name)  # one block size (read by host code: tiledsl/frontend/block_sizes.py)
        if i is not None:
            return default if self.block_sizes is None or i >= len(self.block_sizes) \
                else self.block_sizes[i]
        return dict(self.knobs).get(name, default)

    def replace(self, **changes: Any) -> Config:
        """A copy with some fields or knobs changed."""
        d = self.to_dict()
        d.update(changes)
        return Config.from_dict(d)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"block_sizes": list(self.block_sizes)}
        if self.num_warps is not None:
            d["num_warps"] = self.num_warps
        if self.num_stages is not None:
            d["num_stages"] = self.num_stages
        d.update((k, _listed(v)) for k, v in self.knobs)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Config:
        if not isinstance(d, dict):
            raise ConfigError(f"a config is a JSON object (dict), got {type(d).__name__}")
        d = dict(d)
        odd = [k for k in d if not isinstance(k, str)]
        if odd:
            raise ConfigError(f"a config's keys are names (strings), got {odd[0]!r}")
        if not isinstance(d.get("block_sizes", ()), (list, tuple)):
            raise ConfigError(f"block_sizes must be a list of ints, got {d['block_sizes']!r}")
        return cls(d.pop("block_sizes", ()), d.pop("num_warps", None),
                   d.pop("num_stages", None), **d)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Config:
        if not isinstance(text, (str, bytes, bytearray)):
            raise ConfigError(f"a config's JSON is a string, got {type(text).__name__}")
        try:
            return cls.from_dict(json.loads(text))
        except json.JSONDecodeError as e:
            raise ConfigError(f"config is not valid JSON: {e}") from None

    def __repr__(self) -> str:
        parts = [f"block_sizes={self.block_sizes}"]
        if self.num_warps is not None:
            parts.append(f"num_warps={self.num_warps}")
        if self.num_stages is not None:
            parts.append(f"num_stages={self.num_stages}")
        parts += [f"{k}={v!r}" for k, v in self.knobs]
        return f"Config({', '.join(parts)})"


def _knob_value(value: Any) -> bool:
    """Whether `value` is a knob's: a JSON scalar (a finite float), None, or a list or tuple
    of those, nested (Helion's `loop_orders=[[1, 0]]`)."""
    if isinstance(value, (list, tuple)):
        return all(_knob_value(v) for v in value)
    return value is None or isinstance(value, (bool, int, str)) or \
        type(value) is float and math.isfinite(value)


def _frozen(value: Any) -> Any:
    return tuple(_frozen(v) for v in value) if isinstance(value, (list, tuple)) else value


def _listed(value: Any) -> Any:
    return [_listed(v) for v in value] if isinstance(value, tuple) else value


@dataclass(frozen=True)
class Param:
    """One tunable: a block size (`block_sizes[i]`) or a backend knob, with its choices."""

    name: str
    choices: tuple[Any, ...]
    default: Any
    doc: str = ""
    # values a config may name beyond `choices`, which a search does not try (Triton's
    # `num_warps=32`, which a Helion config or a user pins)
    pinnable: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Constraint:
    """A rule configs must satisfy: `check(config)` returns None or the reason it fails."""

    name: str
    check: Callable[[Config], str | None]


@functools.lru_cache(maxsize=None)
def _block_index(name: str) -> int | None:
    if name.startswith("block_sizes[") and name.endswith("]"):
        return int(name[len("block_sizes["):-1])
    return None


@dataclass(frozen=True)
class ConfigSpace:
    """The finite set of valid configs of one kernel for one argument signature.

    Backends extend it with knobs (`with_param`) and constraints (`with_constraint`), and with
    redundancy rules (`with_redundancy`): a config a rule flags runs exactly as another config
    of the space does (a knob that cannot act on this kernel under the rest of the config), so
    a search skips it, while a user who asks for it explicitly still gets it.

    A backend may also give an `estimate` (`with_estimate`): an analytic cost of a valid config,
    lower is better, cheap enough to rank the whole space, that a tuner tries first.
    """

    kernel: str
    params: tuple[Param, ...]
    constraints: tuple[Constraint, ...] = ()
    redundant: tuple[Constraint, ...] = ()
    estimate: Callable[[Config], float] | None = None
    # why the kernel's pinned config does not fit these arguments: `default()` raises it, while
    # a call that gives its own config runs (`@td.tile_kernel(config=...)`, runtime/spaces.py)
    unfit: ConfigError | None = None

    @functools.cached_property
    def _split(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The param names of the block sizes (in order) and of the knobs."""
        return (tuple(p.name for p in self.params if _block_index(p.name) is not None),
                tuple(p.name for p in self.params if _block_index(p.name) is None))

    @property
    def num_blocks(self) -> int:
        return len(self._split[0])

    def with_param(self, param: Param) -> ConfigSpace:
        return dataclasses.replace(self, params=self.params + (param,))

    def with_default(self, name: str, value: Any) -> ConfigSpace:
        """The same space with param `name` defaulting to `value` (a backend's preference)."""
        choices = next(p.choices for p in self.params if p.name == name)
        return self.with_choices(name, choices, value)

    def with_choices(self, name: str, choices: tuple[Any, ...], default: Any) -> ConfigSpace:
        """The same space with param `name` taking `choices` (a backend's own range)."""
        params = tuple(dataclasses.replace(p, choices=tuple(choices), default=default)
                       if p.name == name else p for p in self.params)
        return dataclasses.replace(self, params=params)

    def with_constraint(self, constraint: Constraint) -> ConfigSpace:
        return dataclasses.replace(self, constraints=self.constraints + (constraint,))

    def with_redundancy(self, rule: Constraint) -> ConfigSpace:
        return dataclasses.replace(self, redundant=self.redundant + (rule,))

    def with_estimate(self, estimate: Callable[[Config], float]) -> ConfigSpace:
        """The same space with an analytic cost model of its configs (lower is better)."""
        return dataclasses.replace(self, estimate=estimate)

    def duplicate(self, config: Config) -> str | None:
        """Why a search may skip `config` (it runs as another config does), or None."""
        config = self.complete(config)
        for rule in self.redundant:
            why = rule.check(config)
            if why is not None:
                return why
        return None

    def make(self, values: dict[str, Any]) -> Config:
        """A Config from one value per param name."""
        blocks, knobs = self._split
        return Config(tuple(values[n] for n in blocks), **{n: values[n] for n in knobs})

    def admits(self, config: Config) -> bool:
        """For a config `make` built from one choice per param (the search's points): its
        constraints hold and no redundancy rule flags it. The fast test a search runs over the
        whole product; `reason` says why any other config is not in the space."""
        return all(c.check(config) is None for c in self.constraints) and \
            all(r.check(config) is None for r in self.redundant)

    def values(self, config: Config) -> dict[str, Any]:
        out = {}
        for p in self.params:
            i = _block_index(p.name)
            out[p.name] = config.block_sizes[i] if i is not None else config.get(p.name)
        return out

    def complete(self, config: Config) -> Config:
        """`config` with every knob it leaves out set to that knob's default."""
        given = dict(config.knobs)
        missing = {p.name: p.default for p in self.params if _block_index(p.name) is None
                   and config.get(p.name) is None and p.name not in given}
        return config.replace(**missing) if missing else config

    def reason(self, config: Config) -> str | None:
        """Why `config` (its missing knobs at their defaults) is not in this space, or None."""
        config = self.complete(config)
        if len(config.block_sizes) != self.num_blocks:
            blocks = [p for p in self.params if _block_index(p.name) is not None]
            listing = "; ".join(f"{p.name}: {p.doc}" for p in blocks) or "none"
            return (f"{len(config.block_sizes)} block sizes given, the kernel has "
                    f"{self.num_blocks} tunable tile dimensions ({listing})")
        values = self.values(config)
        for param in self.params:
            p, v = param.name, values[param.name]
            if _block_index(p) is not None and (not isinstance(v, int) or v < 1 or v & (v - 1)) \
                    and v not in param.choices:  # (a backend may offer others: spatial's)
                return f"{p} = {v!r} is not a power of two ({param.doc})"
            # True and False are not the knob values 1 and 0 (`group_m=True` is a slip)
            if not any(v == c and isinstance(v, bool) == isinstance(c, bool)
                       for c in (*param.choices, *param.pinnable)):
                extra = [c for c in param.pinnable if c not in param.choices]
                also = f"; a config may also name {extra}" if extra else ""
                return f"{p} = {v!r} is not one of {list(param.choices)} ({param.doc}{also})"
        known = {p.name for p in self.params}
        extra = [k for k, _ in config.knobs if k not in known]
        if extra:
            return f"unknown knobs {extra}; this space has {sorted(known)}"
        for c in self.constraints:
            why = c.check(config)
            if why is not None:
                return f"{c.name}: {why}"
        return None

    def validate(self, config: Config) -> Config:
        if not isinstance(config, Config):
            raise ArgumentError(f"config must be a td.Config, got {type(config).__name__}",
                                kernel=self.kernel)
        why = self.reason(config)
        if why is not None:
            raise ConfigError(f"invalid config {config}: {why}", kernel=self.kernel)
        return self.complete(config)

    def __contains__(self, config: object) -> bool:
        return isinstance(config, Config) and self.reason(config) is None

    @property
    def size_upper_bound(self) -> int:
        n = 1
        for p in self.params:
            n *= len(p.choices)
        return n

    def __iter__(self) -> Iterator[Config]:
        names = [p.name for p in self.params]
        for combo in itertools.product(*(p.choices for p in self.params)):
            config = self.make(dict(zip(names, combo)))
            if all(c.check(config) is None for c in self.constraints):
                yield config

    @property
    def countable(self) -> bool:
        """Whether `len` can count this space (by enumerating, if it has constraints)."""
        return not self.constraints or self.size_upper_bound <= COUNT_LIMIT

    def __len__(self) -> int:
        """The number of valid configs. A space without constraints is its product; one with
        constraints is counted by enumerating, up to COUNT_LIMIT points of the product; past
        that a ConfigError says so at once (`size_upper_bound` bounds it, `sample` draws)."""
        if not self.constraints:
            return self.size_upper_bound
        if self.size_upper_bound > COUNT_LIMIT:
            raise ConfigError(
                f"the config space has up to {self.size_upper_bound} configs (the product of "
                f"{len(self.params)} params' choices), too many to count against its "
                f"constraints (the limit is {COUNT_LIMIT})", kernel=self.kernel,
                hint="use space.size_upper_bound for the bound, space.sample(n) or "
                     "space.default() for configs")
        return sum(1 for _ in self)

    def default_is_valid(self) -> bool:
        return self.make({p.name: p.default for p in self.params}) in self

    def default(self) -> Config:
        """Each param's default; if the constraints reject that, the nearest valid config."""
        if self.unfit is not None:
            raise self.unfit
        config = self.make({p.name: p.default for p in self.params})
        if config in self:
            return config
        if self.size_upper_bound <= COUNT_LIMIT:
            best = min(self, key=lambda c: sum(a != b for a, b in zip(
                self.values(c).values(), self.values(config).values())), default=None)
        else:
            best = search.nearest(self, config)
        if best is None:
            why = "; ".join(r for c in self.constraints if (r := c.check(config)) is not None)
            head = "the config space is empty: no config satisfies its constraints" \
                if self.size_upper_bound <= COUNT_LIMIT else \
                (f"no config the constraints accept within {search.NEAREST_BUDGET} configs "
                 f"nearest the default, of up to {self.size_upper_bound}")
            raise ConfigError(f"{head} (the default config {config}: {why})", kernel=self.kernel)
        return best

    def sample(self, n: int, seed: int | None = None) -> list[Config]:
        """Up to `n` distinct valid configs drawn uniformly (all of them if there are fewer).
        Where the constraints reject nearly every point of the product (dot dimensions of 16 or
        more, in a kernel with many tile loops), rejection finds too few: the rest come from a
        random walk over valid configs, from the default one."""
        if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 0:
            raise ConfigError(f"sample(n): n is a count (an int >= 0), got {n!r}",
                              kernel=self.kernel)
        if seed is not None and (not isinstance(seed, numbers.Integral) or isinstance(seed, bool)):
            raise ConfigError(f"sample(seed=...): the seed is an int or None, got {seed!r}",
                              kernel=self.kernel)
        n = int(n)
        rng = random.Random(None if seed is None else int(seed))
        if self.size_upper_bound <= 4 * n:  # small: enumerate (constraints may be costly)
            pool = list(self)
            rng.shuffle(pool)
            return pool[:n]
        out: dict[Config, None] = {}
        tried: set[Config] = set()
        for _ in range(200 * n):
            config = self.make({p.name: rng.choice(p.choices) for p in self.params})
            if config in tried:
                continue
            tried.add(config)
            if all(c.check(config) is None for c in self.constraints):
                out[config] = None
                if len(out) == n:
                    break
        if 0 < n and len(out) < n:  # constraints reject most of the product: walk from a
            search.walk(self, self.default(), n, rng, out)  # valid config instead
        return list(out)

    def __repr__(self) -> str:
        inner = ", ".join(f"{p.name}={list(p.choices)}" for p in self.params)
        return f"ConfigSpace({self.kernel}: {inner}; {len(self.constraints)} constraints)"
