"""Block sizes the kernel reads (tiledsl/frontend/block_sizes.py): `td.register_block_size`, shared by
loops and tile shapes and read by host code; `t.id` and `t.block_size`."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from lowering.backends.spatial.arch import PRESETS, Arch
from support import example, fresh, under_configs

BACKENDS = ["numpy", "triton-interpret", "spatial"]


def _skip_without_triton(backend: str) -> None:
    if backend == "triton-interpret":
        pytest.importorskip("torch")
        pytest.importorskip("triton")


@td.tile_kernel
def centered_sum(x):
    """Two loops over n share one registered block size; the lane accumulator has its width."""
    m, n = x.shape
    bn = td.register_block_size(n, max=32)
    out = td.empty((m,), dtype=td.float32)
    for tm in td.tile(m):
        first = td.zeros((tm, bn), dtype=td.float32)
        for tn in td.tile(n, block_size=bn):
            first += x[tm, tn]
        mean = first.sum(-1) / n
        acc = td.zeros((tm, bn), dtype=td.float32)
        for tn in td.tile(n, block_size=bn):
            d = x[tm, tn] - mean[:, None]
            acc += d * d
        out[tm] = acc.sum(-1)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(13, 37), (1, 1)], ids=["13x37", "1x1"])
def test_shared_block_size_under_sampled_configs(backend: str, shape: tuple) -> None:
    _skip_without_triton(backend)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    x64 = x.astype(np.float64)
    ref = ((x64 - x64.mean(1, keepdims=True)) ** 2).sum(1)
    space = centered_sum.config_space(x, backend=backend)
    blocks = [p for p in space.params if p.name.startswith("block_sizes[")]
    assert len(blocks) == 2  # n's registered block (both loops) and m's
    seen = set()
    for config in (space.default(), *space.sample(4, seed=3)):
        seen.add(config.block_sizes[0])
        td.testing.assert_close(centered_sum.run(x, backend=backend, config=config), ref,
                                np.float32)
    assert shape == (1, 1) or len(seen) > 1  # the registered block size varies


def test_min_and_max_bound_the_choices() -> None:
    x = np.zeros((5, 300), np.float32)
    assert centered_sum.config_space(x).params[0].choices == (1, 2, 4, 8, 16, 32)

    @td.tile_kernel
    def wide(x):
        bs = td.register_block_size(x.shape[0], min=16)
        out = td.empty(x.shape, dtype=x.dtype)
        for t in td.tile(x.shape[0], block_size=bs):
            out[t] = x[t]
        return out
    assert wide.config_space(np.zeros(5, np.float32)).params[0].choices == (16,)

    @td.tile_kernel
    def helion_bounds(x):
        bs = td.register_block_size(4, x.shape[0])  # Helion's (min, max)
        out = td.empty_like(x)
        for t in td.tile(x.shape[0], block_size=bs):
            out[t] = x[t] * 2
        return out
    x = np.arange(50, dtype=np.float32)
    space = helion_bounds.config_space(x)
    assert space.params[0].choices == (4, 8, 16, 32, 64)
    for config in space:
        np.testing.assert_array_equal(helion_bounds.run(x, config=config), x * 2)


@td.tile_kernel
def ids(x):
    """Each tile writes its index along its loop, and its block size, into its lanes."""
    m, n = x.shape
    tile_id = td.empty((m, n), dtype=td.int32)
    block = td.empty((m, n), dtype=td.int32)
    for tm in td.tile(m):
        for tn in td.tile(n):
            zero = td.zeros((tm, tn), dtype=td.int32)
            tile_id[tm, tn] = zero + tm.id * 1000 + tn.id
            block[tm, tn] = zero + tm.block_size * 1000 + tn.block_size
    return tile_id, block


@pytest.mark.parametrize("backend", BACKENDS)
def test_tile_id_and_block_size(backend: str) -> None:
    _skip_without_triton(backend)
    x = np.zeros((13, 7), np.float32)
    space = ids.config_space(x, backend=backend)
    for config in (space.default(), *space.sample(2, seed=1)):
        bm, bn = config.block_sizes
        tile_id, block = ids.run(x, backend=backend, config=config)
        rows, cols = np.meshgrid(np.arange(13), np.arange(7), indexing="ij")
        np.testing.assert_array_equal(tile_id, rows // bm * 1000 + cols // bn)
        np.testing.assert_array_equal(block, np.full((13, 7), bm * 1000 + bn))


@td.tile_kernel
def col_sum(x):
    """Per-program partial sums in a buffer of td.cdiv(m, bs) rows, indexed by tile.id."""
    m, n = x.shape
    m_block = td.register_block_size(m)
    partial = td.empty((td.cdiv(m, m_block), n), dtype=td.float32)
    out = td.empty((n,), dtype=td.float32)
    block = td.zeros((m_block,), dtype=td.float32)  # a host shape of the block size itself
    for tm in td.tile(m, block_size=m_block):
        for tn in td.tile(n):
            partial[tm.id, tn] = td.sum(x[tm, tn], axis=0)
    for tn in td.tile(n):
        acc = td.zeros((tn,), dtype=td.float32)
        for tb in td.tile(td.cdiv(m, m_block)):
            acc += td.sum(partial[tb, tn], axis=0)
        out[tn] = acc
    return out, partial, block


@pytest.mark.parametrize("backend", BACKENDS)
def test_host_buffer_sized_by_the_block_size(backend: str) -> None:
    _skip_without_triton(backend)
    x = np.random.default_rng(1).standard_normal((29, 5)).astype(np.float32)
    space = col_sum.config_space(x, backend=backend)
    seen = set()
    for config in (space.default(), *space.sample(3, seed=2)):
        b = config.block_sizes[0]
        seen.add(b)
        out, partial, block = col_sum.run(x, backend=backend, config=config)
        assert partial.shape == (-(-29 // b), 5) and block.shape == (b,)  # the trace of b
        td.testing.assert_close(out, x.astype(np.float64).sum(0), np.float32)
    assert len(seen) > 1


def test_triton_source_and_sm90_compile() -> None:
    pytest.importorskip("triton")
    x = np.zeros((29, 5), np.float32)
    config = col_sum.config_space(x, backend="triton").default()
    src = col_sum.source(x, target="triton", config=config)
    assert "tm_id = begin_tm // BLOCK_TM" in src
    b = config.block_sizes[0]
    assert f"empty(({-(-29 // b)}, 5), 'float32')" in src
    assert [r.problem for r in col_sum.compile(x, arch="sm_90")] == [None, None]
    y = np.zeros((13, 7), np.float32)
    assert [r.problem for r in ids.compile(y, arch="sm_90")] == [None]


def test_layer_norm_bwd_on_a_spatial_arch_with_enough_dma_channels() -> None:
    """layer_norm_bwd streams more tensors than the presets' PEs have DMA channels."""
    mod = example("layer_norm_bwd")
    arch = Arch.from_dict(dict(PRESETS["generic-8x8"]().to_dict(), dma_channels=8))
    args = mod.make_inputs(np.random.default_rng(2), {"m": 19, "n": 45})
    space = mod.layer_norm_bwd.config_space(*args, backend="spatial", arch=arch)
    for config in (space.default(), *space.sample(1, seed=0)):
        out = mod.layer_norm_bwd.run(*fresh(args), backend="spatial", arch=arch, config=config)
        td.testing.assert_close(out, mod.reference(*args), np.float32)


def _error(kernel, *args) -> td.TileDSLError:
    with pytest.raises(td.TileDSLError) as e:
        kernel.config_space(*args)
    return e.value


@td.tile_kernel
def bounded_rows(x):
    """Helion's one-argument `hl.register_block_size(min(256, m))` is the largest block: a
    loop over another size cuts with a block of its own, up to it (flex attention)."""
    m, n = x.shape
    bs = td.register_block_size(16)
    out = td.empty((m, n), dtype=x.dtype)
    for tm in td.tile(m, block_size=bs):
        out[tm, :] = x[tm, :] * 2
    return out


def test_a_one_argument_block_size_bounds_tiles_of_another_size() -> None:
    x = np.random.default_rng(4).standard_normal((45, 7)).astype(np.float32)
    space = bounded_rows.config_space(x)
    blocks = {c.block_sizes[0] for c in space.sample(16, seed=1)} | {space.default().block_sizes[0]}
    assert max(blocks) <= 16 and len(blocks) > 1
    for backend in ("numpy", "triton-interpret"):
        for config, out in under_configs(bounded_rows, (x,), backend):
            np.testing.assert_array_equal(out, 2 * x)


@pytest.mark.parametrize(("body", "message"), [
    ("bs = td.register_block_size(n, min=3)", "min= must be a power of two"),
    ("bs = td.register_block_size(n, min=8, max=4)", "min=8 is above max=4"),
    ("bs = td.register_block_size(0)", "a positive int"),
])
def test_bad_registrations_name_the_line(body: str, message: str, tmp_path) -> None:
    src = f"import tiledsl as td\n\n@td.tile_kernel\ndef bad(x):\n    n = x.shape[0]\n    {body}\n" \
          "    return x\n"
    path = tmp_path / "bad_block.py"
    path.write_text(src)
    import importlib.util
    spec = importlib.util.spec_from_file_location("bad_block", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    e = _error(mod.bad, np.zeros(8, np.float32))
    assert message in str(e) and "bad_block.py:" in str(e)


def test_inside_a_loop_is_an_error() -> None:
    @td.tile_kernel
    def late(x):
        out = td.empty(x.shape, dtype=x.dtype)
        for t in td.tile(x.shape[0]):
            td.register_block_size(x.shape[0])
            out[t] = x[t]
        return out
    e = _error(late, np.zeros(8, np.float32))
    assert "inside a tile loop" in str(e) and "td.register_block_size(x.shape[0])" in str(e)


def test_a_block_size_inside_a_loop_it_cuts_is_that_loop_s_tile() -> None:
    """Helion's kl_div: `hl.zeros([block_size_m, block_size_n])` inside the loops that cut with
    them is their tiles' shape, masked at the ragged edge as the tiles are."""
    @td.tile_kernel
    def nested(x):
        n = x.shape[0]
        bs = td.register_block_size(n)
        out = td.empty((n,), dtype=x.dtype)
        for t in td.tile(n, block_size=bs):
            acc = td.zeros((t, bs), dtype=x.dtype) + x[t][:, None]
            out[t] = acc.sum(-1)  # x times the lanes of t inside n
        return out
    x = np.arange(1, 6, dtype=np.float32)
    for backend in ("numpy", "triton-interpret"):
        got = nested.run(x, backend=backend, config=td.Config((4,)))
        np.testing.assert_array_equal(got, x * [4, 4, 4, 4, 1])


@td.tile_kernel
def block_sums(x, starts, bm: int, two: td.constexpr):
    """Helion's flex attention: a block size registered as `min(256, bm)` of an int argument
    (one argument: the largest block; or `(16, ...)`), cutting a loop whose bounds it loads."""
    n = x.shape[0]
    bs = td.register_block_size(16, min(256, bm)) if two else \
        td.register_block_size(min(256, bm))
    out = td.zeros((starts.shape[0],), dtype=td.float32)
    for (t,) in td.tile([starts.shape[0]], block_size=[1]):
        s = starts[t.begin]
        e = td.minimum(s + bm, s.new_full([], n))
        acc = td.zeros([], dtype=td.float32)
        for tn in td.tile(s, e, block_size=bs):
            acc += td.sum(x[tn])
        out[t] = acc[None]
    return out


@pytest.mark.parametrize("two", [False, True])
def test_a_registered_block_cuts_a_loop_of_runtime_bounds(two: bool) -> None:
    x = np.random.default_rng(8).standard_normal(45).astype(np.float32)
    starts = np.array([0, 16, 32], np.int32)
    ref = np.array([x[i:i + 16].astype(np.float64).sum() for i in starts])
    for backend in ("numpy", "triton-interpret"):
        td.testing.assert_close(block_sums.run(x, starts, 16, two, backend=backend), ref,
                                np.float32)


@td.tile_kernel(config=td.Config(block_sizes=[4, 8]))
def tied_rows(k, q):
    """Helion's attention_backward: block sizes registered for one sequence, cutting loops over
    all the batch's rows (`hl.tile(total_rows, block_size=block_n)`), and a runtime range
    (`hl.tile(start_m, end_m, block_size=block_m)`); its config gives one per registration."""
    rows, n = k.shape
    m = q.shape[1]
    block_n = td.register_block_size(n)
    block_m = td.register_block_size(m)
    out = td.empty((rows,), dtype=td.float32)
    for tile_n in td.tile(rows, block_size=block_n):
        start = (tile_n.begin // n) * m
        acc = td.zeros([tile_n], dtype=td.float32)
        for tile_m in td.tile(start, start + m, block_size=block_m):
            acc += q[tile_n.begin // n, tile_m - start].sum() + 0 * k[tile_n, 0]
        out[tile_n] = acc
    return out


def test_a_registered_block_size_over_other_sizes_is_one_param() -> None:
    from tiledsl.ir.parser import parse_ir
    from tiledsl.ir.printer import print_ir
    k = np.ones((3 * 8, 8), np.float32)
    q = np.random.default_rng(2).standard_normal((3, 24)).astype(np.float32)
    fn = tied_rows.traced(k, q).ir
    assert len(fn.symbols) > 2 and fn.tunable_symbols() == list(fn.symbols)[:2]
    assert "tied(B0)" in print_ir(fn) and parse_ir(print_ir(fn)).symbols == fn.symbols
    for backend in ("numpy", "triton-interpret"):
        space = tied_rows.config_space(k, q, backend=backend)
        assert space.num_blocks == 2 and space.default().block_sizes == (4, 8)
        for c in (space.default(), *space.sample(2, seed=3)):
            got = tied_rows.run(k, q, backend=backend, config=c)
            np.testing.assert_allclose(got, np.repeat(q.sum(1), 8), rtol=1e-5)
