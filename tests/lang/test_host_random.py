"""torch.randint / rand / randn in host code (tiledsl/lang/host_random.py): drawn on every call,
from torch's generator as torch draws them, on every backend; flash-attn's dropout seeds
(`torch.randint(2**32, (M,), dtype=torch.int64)`, one per row, loaded by the kernel). Python's
`random.randint` (attorch's dropout seed) likewise, from Python's generator."""

from __future__ import annotations

import json
import random
from random import randint

import numpy as np
import pytest

import tiledsl as td
from support import gpu_backend, run_on
from tiledsl.errors import TraceError
from tiledsl.runtime import draws

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = triton.language


@triton.jit
def _dropout_rows(X, Seeds, Out, N, p, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    seed = tl.load(Seeds + row)
    x = tl.load(X + row * N + cols, mask=mask)
    keep = tl.rand(seed, cols) > p
    tl.store(Out + row * N + cols, tl.where(keep, x / (1 - p), 0.0), mask=mask)


@td.tile_kernel
def dropout(x, p):
    """flash-attn's layer-norm dropout, reduced: a seed per row drawn on the host."""
    M, N = x.shape
    seeds = torch.randint(2**32, (M,), device=x.device, dtype=torch.int64)
    out = torch.empty_like(x)
    _dropout_rows[(M,)](x, seeds, out, N, p, BLOCK=triton.next_power_of_2(N))
    return out, seeds


def dropped(x: np.ndarray, seeds: np.ndarray, p: float) -> np.ndarray:
    """The reference, in float64, from the seeds the kernel drew."""
    cols = np.arange(x.shape[1], dtype=np.int32)
    keep = np.stack([td.philox.rand(int(s), cols) for s in seeds]) > p
    return np.where(keep, x.astype(np.float64) / (1 - p), 0.0)


X = np.random.default_rng(0).standard_normal((37, 129)).astype(np.float32)


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret", "spatial", gpu_backend()])
def test_dropout_seeds_are_drawn_per_call_from_torch(backend: str) -> None:
    torch.manual_seed(7)
    out, seeds = run_on(dropout, (X, 0.3), backend)
    _, again = run_on(dropout, (X, 0.3), backend)
    seeds, again = np.asarray(seeds), np.asarray(again)
    assert (seeds != again).any()  # a new draw each call, not a constant of the trace
    assert seeds.dtype == np.int64 and seeds.min() >= 0 and seeds.max() < 2**32
    np.testing.assert_allclose(np.asarray(out), dropped(X, seeds, 0.3), rtol=1e-6, atol=1e-6)
    if backend != "triton-gpu":  # torch's CPU generator: torch.randint's own numbers
        torch.manual_seed(7)
        np.testing.assert_array_equal(seeds, torch.randint(2**32, (37,), dtype=torch.int64))


@triton.jit
def _dropout_flat(X, Out, n, p, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n)
    keep = tl.rand(seed, offs) > p
    tl.store(Out + offs, tl.where(keep, x / (1 - p), 0.0), mask=offs < n)


@td.tile_kernel
def attorch_dropout(x, p):
    """attorch's dropout forward: `seed = randint(0, 65535)` (from random import randint)."""
    flat = x.flatten()
    out = torch.empty_like(flat)
    seed = randint(0, 65535)
    _dropout_flat[(triton.cdiv(flat.numel(), 128),)](flat, out, flat.numel(), p, seed, BLOCK=128)
    return out.view_as(x)


@td.tile_kernel
def frozen_draw(x):
    return x * random.random()


@td.tile_kernel
def generator_state(x):
    seed, offset = torch.Generator().get_state().view(torch.int64)[:2]
    return x * 2


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret", gpu_backend()])
def test_python_random_draws_per_call_from_pythons_generator(backend: str) -> None:
    random.seed(1234)
    first = run_on(attorch_dropout, (X, 0.3), backend)
    second = run_on(attorch_dropout, (X, 0.3), backend)
    random.seed(1234)
    seed = randint(0, 65535)  # what attorch draws after random.seed(1234)
    offsets = np.arange(X.size, dtype=np.int32)
    keep = (td.philox.rand(seed, offsets) > 0.3).reshape(X.shape)
    np.testing.assert_allclose(first, np.where(keep, X.astype(np.float64) / 0.7, 0.0),
                               rtol=1e-6, atol=1e-6)
    assert (np.asarray(first) != np.asarray(second)).any()  # the next call, the next number
    with pytest.raises(TraceError, match=r"random.random\(\) in a kernel would run once"):
        frozen_draw.run(X, backend="numpy")
    with pytest.raises(TraceError, match=r"torch.Generator.get_state\(\) in a kernel would "
                       "run once"):  # FlagGems' philox seed and offset, read from the state
        generator_state.run(X, backend="numpy")


@td.tile_kernel
def factories(x):
    """Each factory once, copied out by a grid (the kernel reads what was drawn)."""
    m, n = x.shape
    u = torch.rand(m, n)
    z = torch.randn((m, n), dtype=torch.float16)
    ul = torch.rand_like(x)
    zl = torch.randn_like(x, dtype=torch.float64)
    k = torch.randint_like(x, 3, 9, dtype=torch.int32)
    b = torch.randint(low=0, high=2, size=(m, n), dtype=torch.bool)
    out = td.empty((m, n), dtype=td.float64)
    for t in td.tile(m, n):
        out[t] = u[t] + z[t] + ul[t] + zl[t] + k[t] + b[t]
    return out, u, z, ul, zl, k, b


def test_factories_match_torch_on_the_cpu() -> None:
    x = torch.randn(19, 33, dtype=torch.bfloat16)
    torch.manual_seed(3)
    out, u, z, ul, zl, k, b = factories(x)
    torch.manual_seed(3)
    want = [torch.rand(19, 33), torch.randn(19, 33, dtype=torch.float16),
            torch.rand_like(x), torch.randn_like(x, dtype=torch.float64),
            torch.randint_like(x, 3, 9, dtype=torch.int32),
            torch.randint(0, 2, (19, 33), dtype=torch.bool)]
    for got, w in zip((u, z, ul, zl, k, b), want):
        assert got.dtype == w.dtype and torch.equal(got, w)
    total = sum(w.double() for w in want)
    torch.testing.assert_close(out, total, rtol=1e-6, atol=1e-6)  # (u + z + ul: float32)


@triton.jit
def _residues(Seeds, Out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Out + offs, tl.load(Seeds + offs, mask=offs < n) % 7, mask=offs < n)


@td.tile_kernel
def residues(n: int):
    """An int output of masked stores: the NumPy backend runs such a kernel twice to find
    elements no store writes, and both runs must read the same draws."""
    seeds = torch.randint(0, 1000, (n,), dtype=torch.int64)
    out = torch.empty((n,), dtype=torch.int64)
    _residues[(triton.cdiv(n, 32),)](seeds, out, n, BLOCK=32)
    return out, seeds


def test_a_second_run_reads_the_same_draws() -> None:
    out, seeds = residues.run(45, backend="numpy")
    np.testing.assert_array_equal(out, seeds % 7)


def test_a_call_of_no_array_argument_returns_torch_tensors_its_code_made() -> None:
    """TritonBench's `wrapper(size_m, d_head)` draws its inputs with torch and its caller
    calls `.clone()` on the result: torch's tensors, as the code made (`.run`: NumPy's)."""
    torch.manual_seed(5)
    out, seeds = residues(45)
    assert isinstance(out, torch.Tensor) and isinstance(seeds, torch.Tensor)
    torch.manual_seed(5)
    assert torch.equal(seeds, torch.randint(0, 1000, (45,))) and torch.equal(out, seeds % 7)


def test_without_torch_numpy_draws_and_its_seed_holds() -> None:
    """`draws.draw` (NumPy's generator where torch is not imported, CuPy's in a package)."""
    for name in ("float16", "float32", "float64"):
        np.random.seed(0)
        u = draws.draw(np, "rand", (4000,), np.dtype(name))
        assert u.dtype == name and u.min() >= 0 and u.max() < 1  # never 1.0, even rounded
        np.random.seed(0)
        np.testing.assert_array_equal(u, draws.draw(np, "rand", (4000,), np.dtype(name)))
    big = draws.draw(np, "randint", (500,), np.dtype("uint64"), 2**63, 2**64)
    assert big.dtype == np.uint64 and big.min() >= 2**63


@td.tile_kernel
def bad_call(case: int):
    """One refused call per case (an int in a host `if` is static: one trace per case)."""
    if case == 0:
        y = torch.randint(0, 1000, (4,), dtype=torch.int8)
    elif case == 1:
        y = torch.rand(4, dtype=torch.int32)
    elif case == 2:
        y = torch.rand(4, generator=torch.Generator())
    else:
        y = torch.randint(5, 5, (4,))
    return y


@pytest.mark.parametrize("case, says", [(0, "does not fit int8"), (1, "makes floats"),
                                        (2, "default generator"), (3, "must be below")])
def test_bad_calls_are_trace_errors_at_their_line(case: int, says: str) -> None:
    with pytest.raises(TraceError, match=says) as e:
        bad_call.run(case, backend="numpy")
    assert str(e.value).splitlines()[1].strip().startswith("y = torch.rand")  # its line


def test_generated_launcher_and_package_draw_per_call(tmp_path) -> None:
    src = dropout.source(X, 0.3, target="triton")
    assert "seeds = empty((37,), 'int64')\n    seeds.random_(0, 4294967296)" in src
    src = attorch_dropout.source(X, 0.3, target="triton")
    assert "import random\n" in src and ".fill_(random.randrange(0, 65536))" in src
    dropout.export(tmp_path / "pkg", X, 0.3, arch="sm_90")
    manifest = json.loads((tmp_path / "pkg" / "manifest.json").read_text())
    assert manifest["buffers"][0] == {"name": "seeds", "shape": [37], "dtype": "int64",
                                      "init": "randint", "low": 0, "high": 2**32}
