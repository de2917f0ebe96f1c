"""Random numbers (`td.rand`, `td.randn`, `td.randint` and their 4x forms): Triton's Philox
family, bit for bit, on every backend; the generated Triton calls `tl.rand` itself, so the
triton-interpret runs compare tiledsl's NumPy Philox (tiledsl/lang/philox.py) with Triton's own."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

import tiledsl as td
from support import gpu_backend, run_on, under_configs
from tiledsl.ir.parser import parse_ir
from tiledsl.ir.printer import print_ir

BACKENDS = ["numpy", "triton-interpret", "spatial", gpu_backend()]
# The key is the seed's two 32-bit words: seeds past 2**31 and 2**32 fill the high word, a
# negative one is sign-extended to 64 bits (as Triton casts it).
SEEDS = [0, 12345, 2**31 + 5, 2**40 + 3, -7, 2**63 - 1]


@td.tile_kernel
def draw(offsets, seed):
    """Every random op at the given offsets: 10 float tiles and 6 int32 tiles (the last does
    arithmetic on randint's words, which are int32 in the generated code too)."""
    m, n = offsets.shape
    floats = td.empty((10, m, n), dtype=td.float32)
    words = td.empty((6, m, n), dtype=td.int32)
    for tm, tn in td.tile(m, n):
        o = offsets[tm, tn]
        floats[0, tm, tn] = td.rand(seed, o)
        floats[1, tm, tn] = td.randn(seed, o)
        words[0, tm, tn] = td.randint(seed, o)
        u, z, w = td.rand4x(seed, o), td.randn4x(seed, o), td.randint4x(seed, o)
        for i in range(4):
            floats[2 + i, tm, tn] = u[i]
            floats[6 + i, tm, tn] = z[i]
            words[1 + i, tm, tn] = w[i]
        words[5, tm, tn] = (td.randint(seed, o) // 3) ^ (w[1] // 5)
    return floats, words


def expected(offsets: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    p = td.philox
    floats = [p.rand(seed, offsets), p.randn(seed, offsets), *p.rand4x(seed, offsets),
              *p.randn4x(seed, offsets)]
    words = [p.randint(seed, offsets), *p.randint4x(seed, offsets)]
    return np.stack(floats), np.stack(words + [(words[0] // 3) ^ (words[2] // 5)])


@cache
def offsets_of(dtype: str) -> np.ndarray:
    """Ragged (37, 19) offsets over the dtype's whole range: negative ones, and for int64 ones
    past 2**32 (their high word is Philox's second counter word)."""
    info = np.iinfo(dtype)
    out = np.random.default_rng(3).integers(info.min, info.max, (37, 19), dtype=dtype,
                                            endpoint=True)
    # seed 0 draws uniforms below 1e-7 at 14883995 and 17758991, where Box-Muller clamps them
    out[0, :6] = [0, 1, -1, info.max, 14883995, 17758991]
    return out


def assert_same_bits(out: tuple, ref: tuple, backend: str = "numpy") -> None:
    """Bit for bit; on a GPU the normal draws (floats 1 and 6-9) only within 1e-5: Triton's
    randn takes log, cos and sin there from the approximate lg2/sin/cos instructions (an H100
    gave 1-2 ulp differences in 14% of them), while uniforms and words stay exact."""
    for o, r in zip(out, ref):
        assert o.dtype == r.dtype
        if backend == "triton-gpu" and o.dtype == np.float32:
            normal = [1, 6, 7, 8, 9]
            np.testing.assert_allclose(o[normal], r[normal], rtol=1e-5, atol=1e-5)
            o, r = np.delete(o, normal, axis=0), np.delete(r, normal, axis=0)
        np.testing.assert_array_equal(o.view(np.uint32), r.view(np.uint32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_draws_tritons_bits(backend: str) -> None:
    """Every seed, int32 and int64 offsets, the default and sampled configs."""
    for dtype in ("int32", "int64"):
        offsets = offsets_of(dtype)
        for seed in SEEDS:
            assert_same_bits(run_on(draw, (offsets, seed), backend), expected(offsets, seed),
                             backend)
        for config, out in under_configs(draw, (offsets, SEEDS[3]), backend):
            assert_same_bits(out, expected(offsets, SEEDS[3]), backend)


def test_offsets_take_their_dtype_into_account() -> None:
    """An int64 offset's high word is a counter word, so -1 draws differently as int32 and as
    int64, while non-negative offsets below 2**31 draw the same in both dtypes."""
    small = np.arange(37 * 19).reshape(37, 19)
    same = [draw(small.astype(d), 5) for d in (np.int32, np.int64)]
    assert_same_bits(same[0], same[1])
    minus_one = [draw(np.full((1, 1), -1, d), 5)[1] for d in (np.int32, np.int64)]
    assert (minus_one[0] != minus_one[1]).all()


@td.tile_kernel
def noise_row_sums(x, seed):
    """Row sums of x and of normal noise over column tiles of 16 (lanes past the ragged edge
    add nothing, whatever they draw); each row draws from its own seed, a value per program."""
    m, n = x.shape
    out = td.empty((m,), dtype=td.float32)
    for i in td.grid(m):
        acc = td.full((), 0.0, dtype=td.float32)
        for tn in td.tile(n, block_size=16):
            acc += td.sum(x[i, tn]) + td.sum(td.randn(seed + i, tn.index))
        out[i] = acc
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_reductions_over_ragged_tiles(backend: str) -> None:
    x = np.random.default_rng(0).standard_normal((23, 37)).astype(np.float32)
    noise = np.stack([td.philox.randn(1000 + i, np.arange(37)) for i in range(23)])
    ref = (x.astype(np.float64) + noise).sum(axis=1)
    for config, out in under_configs(noise_row_sums, (x, 1000), backend):
        td.testing.assert_close(out, ref, np.float32)


def test_statistics() -> None:
    """10**5 draws: uniform in [0, 1) and standard normal moments, balanced bits, and no
    correlation between the four words, or between two seeds."""
    offsets = np.arange(10**5, dtype=np.int32).reshape(400, 250)
    floats, words = draw(offsets, 42)
    u, z = floats[0].ravel(), floats[1].ravel()
    assert 0.0 <= u.min() and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002
    assert abs(z.mean()) < 0.02 and abs(z.var() - 1.0) < 0.03
    bits = (words[0].view(np.uint32).ravel()[:, None] >> np.arange(32, dtype=np.uint32)) & 1
    assert np.all(np.abs(bits.mean(axis=0) - 0.5) < 0.01)
    other = draw(offsets, 43)[0][0].ravel()
    streams = np.stack([floats[2 + i].ravel() for i in range(4)] + [u, other])
    corr = np.corrcoef(streams) - np.eye(6)
    corr[0, 4] = corr[4, 0] = 0.0  # rand is rand4x's first word
    assert np.abs(corr).max() < 0.02


def test_ir_round_trips() -> None:
    text = draw.source(offsets_of("int32"), 1, target="ir")
    assert "randint4x %seed" in text
    assert print_ir(parse_ir(text)) == text


def test_triton_code_calls_tl_rand_and_compiles_for_sm_90() -> None:
    pytest.importorskip("triton")
    offsets = offsets_of("int64")
    text = draw.source(offsets, 1, target="triton")
    assert "rand = tl.rand(seed_1, offsets_tile)" in text
    assert "randint = tl.randint(seed_1, offsets_tile).to(tl.int32, bitcast=True)" in text
    (report,) = draw.compile(offsets, 1, arch="sm_90")
    assert ".target sm_90" in report.ptx and "mul.hi.u32" in report.ptx  # Philox's rounds


@td.tile_kernel
def noisy(x, seed):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] + td.rand(seed, t.index)
    return out


@td.tile_kernel
def ramped(x, seed):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] + (t.index + seed).astype(td.float32)
    return out


def test_the_spatial_cost_model_prices_philox() -> None:
    """Ten rounds of integer work per draw: on the same data, a draw costs the PEs more than
    an add (priced as one, the two kernels would take the same time)."""
    x = np.ones(4096, np.float32)
    # one 1024-lane block per PE: compute, not the transfers, sets the time
    config = noisy.config_space(x, 1, backend="spatial").complete(td.Config(block_sizes=(1024,)))
    cycles = [k.simulate(x, 1, arch="generic-8x8", config=config).cycles for k in (noisy, ramped)]
    assert cycles[0] > 1.5 * cycles[1]


@td.tile_kernel
def bad_seed(x, seed):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = td.rand(seed, t.index)
    return out


@td.tile_kernel
def tile_seed(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = td.rand(td.arange(0, 2), t.index)
    return out


@td.tile_kernel
def seed_per_lane(seeds, offsets):
    """TritonBench's multinomial sampling: `tl.rand(tl.load(Seeds + off), offset)`."""
    out = td.empty(seeds.shape, dtype=td.float32)
    for t in td.tile(seeds.shape[0]):
        out[t] = td.rand(seeds[t], offsets[t])
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_a_seed_per_lane(backend: str) -> None:
    rng = np.random.default_rng(6)
    seeds = rng.integers(-2**62, 2**62, 37)
    offsets = rng.integers(0, 2**31, 37).astype(np.int32)
    want = [td.philox.rand(int(s), np.array([o]))[0] for s, o in zip(seeds, offsets)]
    np.testing.assert_array_equal(seed_per_lane.run(seeds, offsets, backend=backend), want)
    if backend == "numpy":  # (Triton's tl.rand takes a tile of seeds: it compiles)
        assert seed_per_lane.compile(seeds, offsets, arch="sm_90")[0].registers > 0


@td.tile_kernel
def float_offsets(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = td.randn(0, x[t])
    return out


@td.tile_kernel
def huge_seed(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = td.rand(2**64 - 1, t.index)
    return out


@pytest.mark.parametrize("call, error, words", [
    (lambda x: bad_seed(x, 0.5), td.DTypeError,
     "must be an integer scalar or tile, got a float64 scalar"),
    (lambda x: tile_seed(x), td.DTypeError, "seeds of shape (2,) for offsets of shape (t,)"),
    (lambda x: float_offsets(x), td.DTypeError, "offsets must be an integer tile, got float32"),
    (lambda x: huge_seed(x), td.DTypeError, "does not fit in int64"),
], ids=["float-seed", "tile-seed", "float-offsets", "huge-seed"])
def test_bad_input_names_the_line(call, error, words) -> None:
    x = np.ones(5, np.float32)
    with pytest.raises(error, match="test_random.py") as e:
        call(x)
    assert words in str(e.value) and "td.rand" in str(e.value) and e.value.hint


def test_outside_a_kernel_points_to_the_host_functions() -> None:
    with pytest.raises(td.TraceError, match="td.philox.randn"):
        td.randn(0, np.arange(3))
    with pytest.raises(td.ArgumentError, match="offsets are integers"):
        td.philox.randn(0, np.arange(3.0))


@td.tile_kernel
def rand_two_ways(seed, n: td.constexpr, rounds: td.constexpr = 10):
    """FlagGems' dropout converts `randint` words itself with `tl.uint_to_uniform_float`, the
    function `tl.rand` applies: the two agree bit for bit (also at vLLM's `td.randint(seed,
    offs, PHILOX_ROUNDS)`)."""
    a = td.empty((n,), td.float32)
    b = td.empty((n,), td.float32)
    for t in td.tile(n):
        a[t] = td.rand(seed, t.index, n_rounds=rounds)
        b[t] = td.uint_to_uniform_float(td.randint(seed, t.index, rounds))
    return a, b


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_uint_to_uniform_float_is_what_rand_applies(backend: str) -> None:
    a, b = run_on(rand_two_ways, (1234, 300), backend)
    np.testing.assert_array_equal(a, b)
    assert 0.0 <= a.min() and a.max() < 1.0
    c, d = run_on(rand_two_ways, (1234, 300, 7), backend)  # 7 rounds: other words, the host's
    np.testing.assert_array_equal(c, d)
    np.testing.assert_array_equal(c, td.philox.rand(1234, np.arange(300), 7))
    assert not np.array_equal(a, c)


@td.tile_kernel
def dropout_philox(x, y, keep, n, p, seed, offset, BLOCK: td.constexpr,
                   N_ROUNDS: td.constexpr):
    """FlagGems' dropout as written: `tl.philox` on a 64-bit offset split into two uint32
    counter words (a scalar high word beside a tile), four uniforms a lane, four blocks a
    program; N_ROUNDS != 10 is Philox's `n_rounds=`."""
    for pid in td.grid(td.cdiv(n, BLOCK * 4)):
        seed = seed.to(td.int64)
        offset = offset.to(td.int64)
        c0 = (offset & 0xFFFFFFFF).to(td.uint32)
        c1 = ((offset >> 32) & 0xFFFFFFFF).to(td.uint32)
        c0 += pid * BLOCK + td.arange(0, BLOCK)
        _O = c0 * 0
        if N_ROUNDS == 10:
            r = td.philox(seed, c0, c1, _O, _O)
        else:
            r = td.philox(seed, c0, c1, _O, _O, n_rounds=N_ROUNDS)
        for j in td.static_range(4):
            kept = td.uint_to_uniform_float(r[j]) > p
            offs = pid * BLOCK * 4 + j * BLOCK + td.arange(0, BLOCK)
            v = td.load(x + offs, mask=offs < n, other=0.0)
            td.store(keep + offs, kept, mask=offs < n)
            td.store(y + offs, v * (1.0 / (1.0 - p)) * kept, mask=offs < n)


def _dropout_ref(x: np.ndarray, p: float, seed: int, offset: int, block: int,
                 rounds: int) -> np.ndarray:
    pid = np.arange(-(-x.size // (4 * block)))
    c0 = np.uint32(offset & 0xFFFFFFFF) + (pid[:, None] * block + np.arange(block)).astype(
        np.uint32)
    words = td.philox(seed, c0, offset >> 32, 0, 0, n_rounds=rounds)
    u = np.stack([td.philox.uniform(w) for w in words], axis=1)  # (program, word, lane)
    return (u > p).reshape(-1)[:x.size]


@pytest.mark.parametrize("backend", BACKENDS)
def test_tl_philox_as_flaggems_calls_it(backend: str) -> None:
    """Every backend draws the host's words (and the triton-interpret run compares them with
    Triton's own `tl.philox`, which the generated code calls), bit for bit, at a ragged n, a
    negative seed and an offset past 2**32, under the default and sampled configs."""
    x = np.random.default_rng(1).standard_normal(1001).astype(np.float32)
    for rounds in (10, 7):
        y, keep = np.zeros_like(x), np.zeros(x.size, bool)
        args = (x, y, keep, x.size, 0.3, -12345, 2**33 + 77, 64, rounds)
        for config, _ in under_configs(dropout_philox, args, backend, samples=1):
            ref = _dropout_ref(x, 0.3, -12345, 2**33 + 77, 64, rounds)
            np.testing.assert_array_equal(keep, ref)
            td.testing.assert_close(y, np.where(ref, x.astype(np.float64) / 0.7, 0.0),
                                    np.float32)
        assert 0.6 < keep.mean() < 0.8


def test_philox_on_the_host_is_randint4x_at_its_counter() -> None:
    """randint4x(seed, offsets) is philox(seed, low word, high word, 0, 0); fewer rounds draw
    other words; the generated Triton calls tl.philox with n_rounds only where it is not 10."""
    offsets = offsets_of("int64")
    lo, hi = offsets.astype(np.uint32), (offsets >> 32).astype(np.uint32)
    for seed in SEEDS:
        words = td.philox(seed, lo, hi, 0, 0)
        for w, r in zip(words, td.philox.randint4x(seed, offsets)):
            np.testing.assert_array_equal(w.view(np.int32), r)
    assert (td.philox(5, lo, hi, 0, 0, n_rounds=7)[0] != td.philox(5, lo, hi, 0, 0)[0]).any()
    x = np.ones(100, np.float32)
    args = (x, x.copy(), np.zeros(100, bool), 100, 0.5, 1, 2, 32)
    calls = [[line for line in dropout_philox.source(*args, rounds, target="triton")
              .splitlines() if "tl.philox(" in line] for rounds in (10, 7)]
    assert len(calls[0]) == 1 and calls[0][0].strip().startswith("word, word_1, word_2")
    assert "n_rounds" not in calls[0][0] and calls[1][0].endswith(", n_rounds=7)")
    text = dropout_philox.source(*args, 7, target="ir")
    assert "n_rounds = 7" in text and print_ir(parse_ir(text)) == text


@td.tile_kernel
def float_counter(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = td.uint_to_uniform_float(td.philox(1, x[t], 0, 0, 0)[0])
    return out


def test_philox_errors_name_the_line() -> None:
    with pytest.raises(td.DTypeError, match="test_random.py") as e:
        float_counter(np.ones(5, np.float32))
    assert "counter c0 must be integers, got float32" in str(e.value) and e.value.hint
    with pytest.raises(td.ArgumentError, match="n_rounds"):
        td.philox(1, np.arange(3), 0, 0, 0, n_rounds=-1)
    with pytest.raises(td.ArgumentError, match="counter c1 = 4294967296"):
        td.philox(1, np.arange(3), 2**32, 0, 0)
