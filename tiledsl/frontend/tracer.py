"""The tracer: the state shared by every DSL call while a kernel body runs on proxies."""

from __future__ import annotations

from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import Any, Callable, Iterator, NamedTuple, NoReturn

from tiledsl.errors import Loc, ShapeError, TileDSLError, TraceError, user_loc
from tiledsl.ir.core import Block, Op, Symbol, Value
from tiledsl.ir.ops import result_types
from tiledsl.ir.types import TileType, Type
from tiledsl.ir.views import row_major

_active: list[Tracer] = []


class Induction(NamedTuple):
    """A value a counted loop carries and steps by a fixed amount each trip (a pointer bump):
    `first + sign * amount * trips`, where the loop's counter is `start + step * trips`."""

    first: Value
    amount: Value
    counter: Value
    step: int  # the counter's
    sign: int  # 1 for `p += amount`, -1 for `p -= amount`


class Tracer:
    """Builds one kernel's IR: a stack of open blocks and the block-size symbols made so far."""

    def __init__(self, kernel: str, file: str) -> None:
        self.kernel = kernel
        self.file = file
        self.body = Block()
        self.blocks: list[Block] = [self.body]
        self.depths: list[str] = ["host"]  # "host", then "grid", then "loop" for each nested loop
        self.symbols: dict[str, Symbol] = {}
        self.labels: dict[str, str] = {}  # block symbol -> the user's loop variable name
        self.int_params: dict[Value, str] = {}  # runtime int arguments -> their names
        # Python float arguments -> their names: an `if` in host code specializes on them
        self.float_params: dict[Value, str] = {}
        self.sites: dict[tuple, str] = {}  # (call site, size position, extent) -> block symbol
        self.tunables: dict[str, Any] = {}  # td.register_tunable: knob name -> its choices
        self.knobs: dict[str, Any] = {}  # the knob values this trace is for (tunables.py)
        self.jagged: dict[Value, Any] = {}  # td.jagged_tile's ranges -> their lengths (jagged.py)
        # counted loops' counters (loops.py `Counter`) -> (start, stop): values in [start, stop)
        self.counters: dict[Value, tuple[Value, Value]] = {}
        self.counter_steps: dict[Value, int] = {}  # and their steps (positive ints)
        # values a counted loop carries and steps by a fixed amount each trip (a pointer bump),
        # -> how (loops.py `_inductions`)
        self.inductions: dict[Value, Induction] = {}
        # the race check's memos for the grid being traced: accesses' elements per program
        # (concrete.py), the int arguments ops read (races.py)
        self.race_memo: dict[Any, Any] = {}
        # per open counted loop, race checks waiting for its carried values' steps (races.py)
        self.deferred: list[list[Any]] = []
        # inside a Triton launch's body (frontend/launches.py): tl.program_id(axis)'s values
        self.program_ids: list[Any] | None = None
        self.inlining: list[str] = []  # kernels whose bodies this one's host code runs
        self.triton_body = 0  # inside a @triton.jit body (its sums take Triton's dtypes)
        # arguments given as 0-d arrays -> their names: td.load reads them; a store makes them memory
        self.array_scalars: dict[Value, str] = {}
        self.lock: Any = None  # the spin lock the program holds at this point (locks.py)
        self.no_program: Loc | None = None  # a grid of no program, not traced (loops.py)
        self.grad_reads: set[str] = set()  # arguments whose `x.requires_grad` the code read
        self.grad_true: frozenset[str] = frozenset()  # and those that answer True
        self.applies: list[Any] = []  # torch.autograd.Function applies (autograd_functions)
        self.backward: Any = None  # in a kernel's backward: what its apply computes (the same)
        self.captured: list[tuple[Any, Any]] = []  # (array, its Tensor): captured.py
        self.arguments: dict[Value, str] = {}  # the kernel's tensor arguments -> their names
        self.torch_made = False  # host code made a tensor with torch's factories (torch_calls)
        # (Triton autotuner, the config a launch chose): each run sets its `best_config`
        self.best_configs: list[tuple[Any, Any]] = []
        # host code's copies of a tensor in another dtype (`x.to(torch.bfloat16)`) -> the
        # tensor copied: a gradient reaches an argument through them (autograd_functions.py)
        self.host_casts: dict[Value, Value] = {}
        self.valued: dict[int, str] = {}  # valued arguments' real tensors -> names (valued_args)
        # tensors host code made of numbers known while tracing -> those numbers (host_tensors)
        self.constants: dict[Value, Any] = {}
        self.cas_keys: dict[Value, tuple] = {}  # compare-and-swaps' results -> where (locks.py)
        self.access_mask: Any = None  # (tracer, indices, shape) -> their rows' masks, or None
        self.jagged_rows: Any = None  # (tracer, value, axis) -> the rows' lanes in range, or None
        # how many names the target of the `for` statement whose iterable is being evaluated
        # binds (loops.targets), for td.tile to read once: Helion's `hl.tile(begin, end)`
        self.loop_targets: int | None = None
        # tensors' flat views for Triton's pointers, per host block (frontend/pointers.py)
        self.flat_views: dict[tuple[Value, int, Any], Any] = {}
        # arguments laid out other than row-major -> their strides (elements): the trace is
        # for that layout (arg_specs.py), which `x.stride()` and pointers into `x` follow
        self.layouts: dict[Value, tuple[int, ...]] = {}

    def strides(self, v: Value) -> tuple[int, ...]:
        """The strides (elements) of root tensor `v`: an argument's layout, else row-major."""
        return self.layouts.get(v) or row_major(v.type.shape)  # type: ignore[union-attr]

    @property
    def depth(self) -> str:
        return self.depths[-1]

    def fail(self, cls: type[TileDSLError], message: str, hint: str | None = None,
             loc: Loc | None = None) -> NoReturn:
        raise cls(message, kernel=self.kernel, loc=loc or user_loc(), hint=hint)

    def emit(self, name: str, operands: list[Value], attrs: dict[str, Any] | None = None,
             types: list[Type] | None = None, hint: str | None = None,
             loc: Loc | None = None) -> list[Value]:
        """Append one op to the current block, typed by its rule; returns its results."""
        attrs = {} if attrs is None else attrs  # (the caller's dict: a check that waits marks it)
        loc = loc or user_loc()
        try:
            rtypes = result_types(name, [o.type for o in operands], attrs, types)
        except TileDSLError as e:
            raise e.with_context(kernel=self.kernel, loc=loc) from None
        if any(isinstance(t, TileType) and 0 in t.shape for t in rtypes):
            self.fail(ShapeError, f"{name} makes a tile of shape "
                      f"{self.describe_shape(rtypes[0].shape)}: a tile "
                      "has no empty dimension", loc=loc, hint="a kernel takes tensors with an "
                      "empty dimension where the grids over them run no program (a grid of "
                      "cdiv(0, BLOCK) programs) or only masked-off lanes reach them")
        results = [Value(t, hint) for t in rtypes]
        self.blocks[-1].ops.append(Op(name, operands, results, attrs, [], loc))
        return results

    def new_symbol(self, extent: int, loc: Loc | None, low: int | None = None,
                   high: int | None = None, tied: str | None = None) -> str:
        name = f"B{len(self.symbols)}"
        self.symbols[name] = Symbol(name, extent, loc, low, high, tied)
        return name

    def site_symbol(self, key: tuple | None, extent: int, loc: Loc | None) -> str:
        """The block symbol of a `td.tile` call site (`key`: the site, the size's position,
        its extent), made on its first trace and shared by the later ones, unless a range it
        cuts encloses this one (a call site nested in itself, through a helper)."""
        name = self.sites.get(key) if key is not None else None
        if name is None or self._open(name):
            name = self.new_symbol(extent, loc)
            if key is not None and key not in self.sites:
                self.sites[key] = name
        return name

    def _open(self, symbol: str) -> bool:
        return any(getattr(a.type, "block", None) == symbol for b in self.blocks for a in b.args)

    def rollback_symbols(self, count: int) -> None:
        """Forget symbols made after the first `count` (a loop body traced again)."""
        for name in list(self.symbols)[count:]:
            del self.symbols[name]
            self.labels.pop(name, None)
        self.sites = {k: s for k, s in self.sites.items() if s in self.symbols}

    @contextmanager
    def region(self, block: Block, depth: str) -> Iterator[Block]:
        self.blocks.append(block)
        self.depths.append(depth)
        try:
            yield block
        finally:
            self.blocks.pop()
            self.depths.pop()

    def describe_dim(self, d: int | str) -> str:
        """A dimension as the user wrote it: a loop variable's name, or an int."""
        if isinstance(d, str):
            return self.labels.get(d, d)
        return str(d)

    def describe_shape(self, shape: tuple) -> str:
        inner = ", ".join(self.describe_dim(d) for d in shape)
        return f"({inner},)" if len(shape) == 1 else f"({inner})"


def current(what: str = "this") -> Tracer:
    """The active tracer; outside a kernel trace, a TraceError that names the call."""
    if not _active:
        raise TraceError(f"{what} can only be used inside a @td.tile_kernel function",
                         loc=user_loc())
    return _active[-1]


def active() -> Tracer | None:
    return _active[-1] if _active else None


@contextmanager
def tracing(tracer: Tracer) -> Iterator[Tracer]:
    with ExitStack() as stack:
        if not _active:  # the outermost trace: what code it calls sees while it runs
            for context in WHILE_TRACING:
                stack.enter_context(context())
        _active.append(tracer)
        try:
            yield tracer
        finally:
            _active.pop()


# Contexts entered while a kernel traces (devices.py: device queries in code the rewrite does
# not reach, a heuristic's lambda, answered as in host code)
WHILE_TRACING: list[Callable[[], AbstractContextManager[Any]]] = []
