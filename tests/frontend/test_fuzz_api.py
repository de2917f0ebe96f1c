"""A bad-input fuzzer: the public API called with generated junk, near-valid and not.

Kernel calls (`k(*args)`, `k.run`) with arguments of wrong types, shapes, dtypes and strides;
`td.Config(...)` with odd values and its JSON form; `k.config_space` and its `sample`,
`validate` and `default`; `k.source(target=..., config=..., arch=...)`; `td.load` of junk paths
and packages; `k.autotune` with bad options. Whatever happens, every exception that leaves the
API must be a `td.TileDSLError` (ArgumentError, ConfigError, BackendError... also TypeError or
ValueError subclasses, so `except TypeError` keeps working), never a raw error from NumPy,
Triton, JSON or Python internals. A call that succeeds is fine: the junk was valid.

    python -m pytest -q tests/frontend/test_fuzz_api.py                             # CI: a few seconds
    TILEDSL_FUZZ_EXAMPLES=2000 python -m pytest -q tests/frontend/test_fuzz_api.py  # longer, random
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from fuzz_settings import fuzz_settings
from hypothesis import event, given
from hypothesis import strategies as st

import tiledsl as td


@td.tile_kernel
def row_sums(x, y):
    m = x.shape[0]
    out = td.empty((m,), dtype=x.dtype)
    for tm in td.tile(m):
        out[tm] = td.sum(x[tm, :] + y[tm, :], axis=1)
    return out


@td.tile_kernel
def scale_(x, alpha):
    """Writes x in place; alpha is a runtime scalar."""
    for t in td.tile(x.shape[0]):
        x[t] = x[t] * alpha


@td.tile_kernel
def gather_rows(table, idx, n: td.constexpr):
    out = td.empty((n, table.shape[1]), dtype=table.dtype)
    for tb, te in td.tile(n, table.shape[1]):
        out[tb, te] = table[idx[tb], te]
    return out


KERNELS = {"row_sums": row_sums, "scale_": scale_, "gather_rows": gather_rows}


def good_args(name: str) -> list[Any]:
    rng = np.random.default_rng(0)
    if name == "row_sums":
        return [rng.standard_normal((5, 7)).astype(np.float32),
                rng.standard_normal((5, 7)).astype(np.float32)]
    if name == "scale_":
        return [rng.standard_normal(9).astype(np.float32), 1.5]
    return [rng.standard_normal((4, 3)).astype(np.float32), np.array([3, 0, 1], np.int32), 3]


# ---------------------------------------------------------------------------------------------
# Junk
# ---------------------------------------------------------------------------------------------
ODD_SCALARS = [None, True, False, 0, 1, -1, 3, 2**31, 2**63, -2**63 - 1, 2**70, 0.0, -0.0, 1.5,
               float("nan"), float("inf"), -float("inf"), 1e308, 1j, "", "abc", "numpy", b"x",
               [], [1, 2], (), (1,), {}, {"a": 1}, object(), np.float32(2), np.int64(3),
               np.bool_(True), np.uint64(2**64 - 1), np.float16(np.nan), np.complex64(1),
               np.datetime64("2020-01-01"), lambda v: v, td.float32, slice(None), Ellipsis, set(),
               np.int8(-1), Path("."), bytearray(b"ab"), range(3)]
ARRAY_DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.int8,
                np.int64, np.uint8, np.uint64, np.bool_, np.complex64, ml_dtypes.float8_e4m3fn,
                object, "U3", "S2", "M8[s]", "m8[s]", [("a", np.float32), ("b", np.int8)],
                np.float128 if hasattr(np, "float128") else np.float64]


@st.composite
def arrays(draw: Any) -> Any:
    dtype = draw(st.sampled_from(ARRAY_DTYPES))
    shape = tuple(draw(st.lists(st.sampled_from([0, 1, 2, 3, 5, 7, 9]), max_size=4)))
    try:
        a = np.zeros(shape, dtype)
        if a.dtype.kind in "fiuc" and a.size:
            a[...] = np.arange(a.size).reshape(shape) % 7
    except (TypeError, ValueError):
        a = np.zeros(shape, np.float32)
    layout = draw(st.sampled_from(["c", "c", "T", "reversed", "broadcast", "strided", "readonly",
                                   "matrix", "masked", "unaligned", "big-endian"]))
    if layout == "T":
        return a.T
    if layout == "reversed" and a.ndim:
        return a[::-1]
    if layout == "broadcast" and a.ndim:
        return np.broadcast_to(a[..., :1], a.shape)
    if layout == "strided" and a.ndim:
        return np.repeat(a, 2, axis=-1)[..., ::2]
    if layout == "readonly":
        a.flags.writeable = False
        return a
    if layout == "matrix" and a.ndim == 2 and a.dtype != object:
        return np.asmatrix(a)
    if layout == "masked":
        return np.ma.masked_array(a)
    if layout == "unaligned" and a.dtype.itemsize > 1 and a.dtype.kind in "fiu":
        raw = np.zeros(a.nbytes + 1, np.uint8)[1:]
        return raw.view(a.dtype).reshape(a.shape)
    if layout == "big-endian" and a.dtype.kind in "fiu" and a.dtype.itemsize > 1:
        return a.astype(a.dtype.newbyteorder(">"))
    return a


@st.composite
def tensors(draw: Any) -> Any:
    """torch CPU tensors (they reach the kernel through DLPack), odd ones included."""
    torch = pytest.importorskip("torch")
    kind = draw(st.sampled_from(["f32", "f32-2d", "grad", "T", "neg", "conj", "bool", "int",
                                 "complex", "sparse", "meta", "0-d", "empty", "expand"]))
    base = torch.arange(35, dtype=torch.float32).reshape(5, 7)
    return {
        "f32": lambda: torch.arange(9, dtype=torch.float32), "f32-2d": lambda: base,
        "grad": lambda: base.clone().requires_grad_(), "T": lambda: base.T,
        "neg": lambda: base.to(torch.complex64).conj().imag._neg_view(),
        "conj": lambda: base.to(torch.complex64).conj(), "bool": lambda: base > 3,
        "int": lambda: base.to(torch.int32), "complex": lambda: base.to(torch.complex64),
        "sparse": lambda: base.to_sparse(), "meta": lambda: torch.empty(5, 7, device="meta"),
        "0-d": lambda: torch.tensor(1.5), "empty": lambda: torch.empty(0, 7),
        "expand": lambda: torch.ones(5, 1).expand(5, 7),
    }[kind]()


junk = st.one_of(st.sampled_from(ODD_SCALARS), arrays(), st.integers(), st.floats(),
                 st.text(max_size=5), st.lists(arrays(), max_size=3), tensors())


@st.composite
def arguments(draw: Any, name: str) -> tuple[list[Any], dict[str, Any]]:
    """The kernel's good arguments, some replaced by junk, some dropped or added."""
    args = good_args(name)
    for i in range(len(args)):
        if draw(st.integers(0, 3)) == 0:
            args[i] = draw(junk)
    how = draw(st.sampled_from(["same", "same", "same", "same", "fewer", "more", "kwarg"]))
    kwargs: dict[str, Any] = {}
    if how == "fewer":
        args = args[:draw(st.integers(0, len(args) - 1))]
    elif how == "more":
        args.append(draw(junk))
    elif how == "kwarg":
        kwargs[draw(st.sampled_from(["x", "y", "alpha", "n", "backend", "bogus"]))] = draw(junk)
    return args, kwargs


backends = st.one_of(st.sampled_from(["numpy", "triton-interpret", "spatial", "", "Numpy",
                                      "triton", "model"]), st.sampled_from(ODD_SCALARS))
targets = st.one_of(st.sampled_from(["ir", "ir-traced", "triton", "spatial", "ptx", "IR", "",
                                     "cubin"]), st.sampled_from(ODD_SCALARS))
knob_values = st.one_of(st.sampled_from(ODD_SCALARS), st.integers(-5, 2**40))
block_sizes = st.one_of(st.sampled_from(ODD_SCALARS),
                        st.lists(st.one_of(st.sampled_from([0, -1, 1, 2, 3, 4, 8, 16, 1024, 2**40,
                                                            2**70]), knob_values), max_size=4),
                        st.lists(st.sampled_from([1, 2, 4, 8]), max_size=3).map(tuple))


@st.composite
def configs(draw: Any) -> Any:
    """A td.Config built from odd values (or the exception building it raised), or junk."""
    kind = draw(st.sampled_from(["config", "config", "json", "dict", "junk", "none"]))
    if kind == "none":
        return None
    if kind == "junk":
        return draw(junk)
    if kind == "json":
        text = draw(st.one_of(st.text(max_size=30), st.sampled_from([
            "{}", "[]", "null", '{"block_sizes": [1, 2]}', '{"block_sizes": "ab"}',
            '{"block_sizes": [1.5]}', '{"num_warps": -1}', '{"block_sizes": [1], "x": [1]}',
            '{"block_sizes": [1e400]}', "{" * 5000])))
        return lambda: td.Config.from_json(text)
    if kind == "dict":
        d = draw(st.one_of(st.sampled_from(ODD_SCALARS), st.dictionaries(
            st.sampled_from(["block_sizes", "num_warps", "num_stages", "group_m", "x"]),
            knob_values)))
        return lambda: td.Config.from_dict(d)
    fields: dict[str, Any] = {}
    if draw(st.booleans()):
        fields["block_sizes"] = draw(block_sizes)
    for name in ("num_warps", "num_stages", "group_m", "split_k", "persistent"):
        if draw(st.integers(0, 3)) == 0:
            fields[name] = draw(knob_values)
    return lambda: td.Config(**fields)


def built(config: Any) -> Any:
    """A config strategy's value: the td.Config a builder makes (which may raise)."""
    return config() if callable(config) and not isinstance(config, td.TileKernel) else config


def expect_tiledsl_errors(call: Any) -> None:
    """Run `call`; only a TileDSLError may leave it."""
    try:
        call()
    except td.TileDSLError as e:
        event(f"raised {type(e).__name__}")  # pytest --hypothesis-show-statistics counts them
    else:
        event("accepted")


# ---------------------------------------------------------------------------------------------
# The fuzz tests
# ---------------------------------------------------------------------------------------------
@fuzz_settings(80)
@given(name=st.sampled_from(sorted(KERNELS)), data=st.data())
def test_kernel_calls_raise_only_tiledsl_errors(name: str, data: st.DataObject) -> None:
    kernel = KERNELS[name]
    args, kwargs = data.draw(arguments(name), label="arguments")
    how = data.draw(st.sampled_from(["call", "run", "space", "source", "simulate", "traced"]),
                    label="call")
    if how != "call":  # (a second `backend=` is Python's own TypeError, at the call site)
        kwargs.pop("backend", None)
    if how == "call":
        expect_tiledsl_errors(lambda: kernel(*args, **kwargs))
    elif how == "run":
        backend = data.draw(backends, label="backend")
        config = data.draw(configs(), label="config")
        expect_tiledsl_errors(lambda: kernel.run(*args, backend=backend, config=built(config),
                                                 **kwargs))
    elif how == "space":
        backend = data.draw(backends, label="backend")
        n, seed = data.draw(knob_values, label="n"), data.draw(knob_values, label="seed")
        config = data.draw(configs(), label="config")

        def space() -> None:
            s = kernel.config_space(*args, backend=backend, **kwargs)
            s.default()
            s.sample(n if not isinstance(n, int) or n < 50 else 50, seed=seed)
            s.validate(built(config))
            assert (built(config) in s) in (True, False)
        expect_tiledsl_errors(space)
    elif how == "simulate":
        config = data.draw(configs(), label="config")
        arch = data.draw(st.one_of(st.none(), st.sampled_from(
            ["generic-8x8", "nope", "sm_90", 3, "", {}])), label="arch")
        expect_tiledsl_errors(lambda: kernel.simulate(*args, arch=arch, config=built(config),
                                                      **kwargs))
    elif how == "traced":
        expect_tiledsl_errors(lambda: (kernel.traced(*args, **kwargs),
                                       kernel.written_args(*args, **kwargs)))
    else:
        target = data.draw(targets, label="target")
        if target == "ptx":  # compiling PTX takes seconds: once is enough per run
            target = "triton"
        config = data.draw(configs(), label="config")
        arch = data.draw(st.one_of(st.none(), st.sampled_from(
            ["sm_90", "sm_80", "sm_1", "generic-8x8", "nope", 90, -1, 1.5])), label="arch")
        expect_tiledsl_errors(lambda: kernel.source(*args, target=target, config=built(config),
                                                    arch=arch, **kwargs))


@fuzz_settings(40)
@given(config=configs())
def test_configs_raise_only_tiledsl_errors(config: Any) -> None:
    """Building a config, and its JSON round trip, hashing and replace."""
    def use() -> None:
        c = built(config)
        if isinstance(c, td.Config):
            hash(c)
            assert td.Config.from_json(c.to_json()) == c
            c.replace(num_warps=4)
    expect_tiledsl_errors(use)


MANIFESTS = st.one_of(
    st.sampled_from(["", "{", "null", "[]", "{}", '{"format": "tiledsl-aot"}',
                     '{"format": "tiledsl-aot", "format_version": 1}',
                     '{"format": "tiledsl-aot", "format_version": 1, "files": {"../x": "00"}}',
                     '{"format": "tiledsl-aot", "format_version": 1, "files": []}']),
    st.text(max_size=40),
    st.dictionaries(st.sampled_from(["format", "format_version", "kernel", "files", "arch",
                                     "launches", "args", "outputs"]),
                    st.one_of(st.sampled_from(ODD_SCALARS[:30]), st.text(max_size=4)),
                    max_size=6).map(lambda d: json.dumps(d, default=str)))


@fuzz_settings(30)
@given(what=st.sampled_from(["path", "dir", "file", "manifest", "manifest-dir"]),
       path=st.one_of(st.sampled_from(ODD_SCALARS), st.text(max_size=8)), manifest=MANIFESTS)
def test_loading_junk_packages_raises_only_tiledsl_errors(tmp_path_factory: Any, what: str,
                                                          path: Any, manifest: str) -> None:
    root = tmp_path_factory.mktemp("pkg")
    if what == "dir":
        path = root
    elif what == "file":
        (root / "f").write_text(manifest)
        path = root / "f"
    elif what == "manifest":
        (root / "manifest.json").write_text(manifest)
        path = root
    elif what == "manifest-dir":
        (root / "manifest.json").mkdir()
        path = str(root)
    expect_tiledsl_errors(lambda: td.load(path))


@fuzz_settings(30)
@given(options=st.fixed_dictionaries({}, optional={
    "trials": knob_values, "timeout": knob_values, "strategy": st.one_of(
        st.sampled_from(["random", "nope", "tpe", ""]), st.sampled_from(ODD_SCALARS)),
    "seed": knob_values, "prune": knob_values, "finalists": knob_values,
    "rounds": knob_values, "backend": backends, "study_name": st.sampled_from(ODD_SCALARS)}))
def test_tune_options_raise_only_tiledsl_errors(options: dict[str, Any]) -> None:
    """`k.autotune` with bad options: refused before any trial runs. (A set of options that
    happens to be valid would start a real tune: such draws are skipped.)"""
    from autotune.options import check_tune_options
    try:
        check_tune_options("row_sums", **{k: options.get(k, d) for k, d in (
            ("trials", 40), ("timeout", None), ("strategy", None), ("prune", 4.0),
            ("finalists", 3), ("seed", 0))})
        valid = options.get("backend", "spatial") in ("numpy", "spatial", "model", "triton")
    except td.TileDSLError:
        valid = False
    if valid:
        return  # the options would start a tune
    expect_tiledsl_errors(lambda: row_sums.autotune(*good_args("row_sums"),
                                                    **{"trials": 1, **options}))


@fuzz_settings(20)
@given(thing=st.one_of(st.sampled_from(ODD_SCALARS), st.sampled_from(
    [print, len, np.add, lambda x: x, td.TileKernel, row_sums, staticmethod(len), int])))
def test_decorating_junk_raises_only_tiledsl_errors(thing: Any) -> None:
    """`td.tile_kernel` of what is not a kernel function (a lambda has no `td.tile` loop: its
    call then fails as a kernel would)."""
    def make() -> None:
        k = td.tile_kernel(thing)
        k(np.ones(3, np.float32))
    expect_tiledsl_errors(make)


def test_what_the_fuzzer_found() -> None:
    """Regressions of the fuzzer's finds: a backend given as something other than a name was a
    TypeError (unhashable) from the caches' lookups; a NaN knob made a config that never equals
    its own JSON round trip."""
    args = good_args("row_sums")
    for call in (lambda: row_sums.run(*args, backend=[]),
                 lambda: row_sums.config_space(*args, backend={}),
                 lambda: row_sums.autotune(*args, backend=["numpy"], trials=1),
                 lambda: td.Config(block_sizes=(1,), persistent=float("nan"))):
        with pytest.raises(td.TileDSLError):
            call()
