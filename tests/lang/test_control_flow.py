"""`if` on a runtime scalar: a conditional region (the `if` op) that each program enters or
skips, on every backend (tiledsl/frontend/branches.py). Work and stores inside a branch happen only where
its condition holds; the names a branch rebinds are the op's results."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from support import under_configs
from tiledsl.runtime.config import Config
from tiledsl.ir.parser import parse_ir
from tiledsl.ir.printer import canonical, print_ir
from tiledsl.ir.verify import verify

BACKENDS = ["numpy", "triton-interpret"]


@td.tile_kernel
def group_means(x, offsets):
    """Grouped rows (MoE-style): group g owns rows offsets[g]:offsets[g + 1]. A non-empty group
    doubles its rows into `out` and stores their mean and its first element; an empty one skips
    the work (and the load at its start, which may be past the end) and stores -1."""
    n, d = x.shape
    out = td.zeros((n, d), dtype=x.dtype)
    means = td.empty((offsets.shape[0] - 1,), dtype=td.float32)
    heads = td.zeros((offsets.shape[0] - 1,), dtype=x.dtype)
    for g in td.grid(offsets.shape[0] - 1):
        start, end = offsets[g], offsets[g + 1]
        m_size = end - start
        total = 0.0
        if m_size > 0:
            for t in td.tile(n, start=start, stop=end):
                for tn in td.tile(d):
                    v = x[t, tn]
                    out[t, tn] = v * 2
                    total += td.sum(v.astype(td.float32))
            means[g] = total / (m_size * d)
            heads[g] = x[start, 0]
        else:
            means[g] = -1.0
    return out, means, heads


def _groups(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((61, 7)).astype(np.float32)
    offsets = np.array([0, 0, 13, 14, 14, 40, 61, 61], dtype=np.int64)  # empty groups too
    return x, offsets


def _group_reference(x: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, ...]:
    out = np.zeros(x.shape)
    means, heads = np.full(offsets.size - 1, -1.0), np.zeros(offsets.size - 1)
    for g, (s, e) in enumerate(zip(offsets[:-1], offsets[1:])):
        if e > s:
            out[s:e] = 2.0 * x[s:e]
            means[g] = x[s:e].astype(np.float64).mean()
            heads[g] = x[s, 0]
    return out, means, heads


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_branch_skips_the_work_and_stores_of_empty_groups(backend: str) -> None:
    x, offsets = _groups(0)
    want = _group_reference(x, offsets)
    for _config, outs in under_configs(group_means, (x, offsets), backend, samples=3):
        td.testing.assert_close(outs, want, np.float32)


@td.tile_kernel
def select_branch(x, alpha):
    """if / elif / else on a scalar argument and a reduction, with `and` and `not`."""
    n, = x.shape
    out = td.empty((n,), dtype=x.dtype)
    for t in td.tile(n):
        v = x[t]
        if alpha > 0 and td.max(v) > 1.0:
            y = v * alpha
        elif not alpha < -1:
            y = v + 1
        else:
            y = -v
        out[t] = y
    return out


def _select_reference(x: np.ndarray, alpha: float, block: int) -> np.ndarray:
    out = []
    for i in range(0, x.size, block):
        v = x[i:i + block].astype(np.float64)
        out.append(v * alpha if alpha > 0 and v.max() > 1.0 else
                   v + 1 if not alpha < -1 else -v)
    return np.concatenate(out)


@pytest.mark.parametrize("backend", BACKENDS)
def test_both_branches_and_short_circuit_conditions(backend: str) -> None:
    x = np.random.default_rng(1).standard_normal(203).astype(np.float32)
    for alpha in (2.5, 0.0, -3.0):
        for config, out in under_configs(select_branch, (x, alpha), backend, samples=1):
            want = _select_reference(x, alpha, config.block_sizes[0])
            td.testing.assert_close(out, want, np.float32)


@td.tile_kernel
def token_accuracy(x, y, width: td.constexpr):
    """Liger's cross entropy: `1.0 if argmax_idx == y else 0.0` on runtime scalars, a
    conditional expression choosing tiles on a scalar argument, and one on a Python value."""
    n = x.shape[0]
    hits = td.empty((n,), td.float32)
    picked = td.empty((n, x.shape[1]), x.dtype)
    for r in td.grid(n):
        cols = td.arange(0, width)
        v = td.load(x, [r, cols], mask=cols < x.shape[1], other=float("-inf"))
        hits[r] = 1.0 if td.argmax(v, axis=0) == td.load(y, [r]) else 0.0
        picked[r, :] = x[r, :] * 2 if td.load(y, [r]) > 2 else x[r, :] - 1 if width > 8 else x[r, :]
    return hits, picked


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_conditional_expression_on_a_runtime_scalar(backend: str) -> None:
    x = np.random.default_rng(12).standard_normal((9, 13)).astype(np.float32)
    y = np.array([x[i].argmax() if i % 3 else 5 for i in range(9)], np.int64)
    hits, picked = token_accuracy.run(x, y, 16, backend=backend)
    np.testing.assert_array_equal(hits, (x.argmax(1) == y).astype(np.float32))
    np.testing.assert_array_equal(picked, np.where(y[:, None] > 2, x * 2, x - 1))


@td.tile_kernel
def sum_big_tiles(x, threshold):
    """Row sums over the column tiles whose max passes `threshold` (an `if` inside a loop,
    rebinding the loop's carried value)."""
    m, k = x.shape
    out = td.empty((m,), dtype=td.float32)
    for tm in td.tile(m):
        acc = td.zeros((tm,), dtype=td.float32)
        for tk in td.tile(k):
            v = x[tm, tk]
            if td.max(v) > threshold:
                acc += td.sum(v, axis=1)
        out[tm] = acc
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_if_inside_a_loop_updates_what_the_loop_carries(backend: str) -> None:
    x = np.random.default_rng(2).standard_normal((37, 150)).astype(np.float32)
    for config, out in under_configs(sum_big_tiles, (x, 2.0), backend, samples=2):
        bm, bk = config.block_sizes
        want = np.zeros(37)
        for i in range(0, 37, bm):
            for j in range(0, 150, bk):
                tile = x[i:i + bm, j:j + bk].astype(np.float64)
                if tile.max() > 2.0:
                    want[i:i + bm] += tile.sum(axis=1)
        td.testing.assert_close(out, want, np.float32)


def test_the_ir_round_trips_and_triton_writes_if_else() -> None:
    x, offsets = _groups(0)
    text = group_means.source(x, offsets, target="ir")
    assert " = if " in text
    fn = parse_ir(text)
    verify(fn)
    assert canonical(parse_ir(print_ir(fn))) == canonical(fn)
    src = select_branch.source(np.ones(50, np.float32), 1.0, target="triton",
                               config=Config((16,)))
    assert "    if " in src and "    else:" in src and "tl.where" not in src


def test_the_if_compiles_for_hopper() -> None:
    pytest.importorskip("triton")
    reports = group_means.compile(*_groups(0), arch="sm_90")
    assert reports and all(r.arch == "sm_90" and r.registers > 0 for r in reports)


def test_the_spatial_mapper_refuses_an_if_at_its_line() -> None:
    x = np.ones((8, 8), np.float32)
    with pytest.raises(td.BackendError, match="cannot map the 'if' op") as info:
        sum_big_tiles.run(x, 2.0, backend="spatial")
    assert info.value.kernel == "sum_big_tiles"
    assert "if td.max(v) > threshold:" in str(info.value)



@pytest.mark.parametrize("backend", BACKENDS)
def test_jsd_takes_every_branch_of_its_runtime_beta(backend: str) -> None:
    """Helion's jsd branches on `beta == 0.0` and `beta == 1.0`, a runtime float: one compiled
    kernel takes each branch, with and without ignored rows (an `if` on a loaded label)."""
    from support import example
    mod = example("jsd")
    before = len(mod.jsd.caches.traces)
    for labels in (True, False):
        for beta in mod.BETAS:
            args = mod.make_inputs(np.random.default_rng(4), {"bt": 13, "v": 37}, np.float32,
                                   beta=beta, labels=labels)
            td.testing.assert_close(mod.jsd.run(*args, backend=backend), mod.reference(*args),
                                    np.float32)
    assert len(mod.jsd.caches.traces) <= before + 2  # one per shift_labels kind (array, None), not beta


@td.tile_kernel
def if_on_a_tile(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        if x[t] > 0:
            out[t] = x[t]
    return out


@td.tile_kernel
def branches_disagree(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        y = x[t]
        if td.sum(y) > 0:
            y = td.sum(y)
        out[t] = y
    return out


@td.tile_kernel
def branch_rebinds_a_tensor(x, y):
    """A name a branch binds to a tile and the other to a tensor (two tensors are a choice:
    tests/lang/test_chosen_tensors.py)."""
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        src = x
        if td.sum(x[t]) > 0:
            src = y[t]
        out[t] = src[t]
    return out


@td.tile_kernel
def break_in_a_branch(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        for r in range(3):
            if td.sum(x[t]) > r:
                break
        out[t] = x[t]
    return out


@pytest.mark.parametrize("kernel, words, hint", [
    (if_on_a_tile, "an `if` on a tile of shape (t,)", "td.where"),
    (branches_disagree, "'y' is float32() where the `if` condition holds but float32(t,)",
     "one dtype and shape"),
    (branch_rebinds_a_tensor, "'src' (TileValue / Tensor) is rebound", "before the `if`"),
    (break_in_a_branch, "cannot contain return, break or continue", "move them out"),
], ids=["tile", "types", "tensor", "break"])
def test_bad_branches_are_clear_errors_at_the_if_line(kernel: td.TileKernel, words: str,
                                                      hint: str) -> None:
    with pytest.raises(td.TraceError) as info:
        kernel(np.ones(8, np.float32), *([np.ones(8, np.float32)]
                                         if kernel is branch_rebinds_a_tensor else []))
    err = info.value
    assert words in err.message and hint in (err.hint or ""), (err.message, err.hint)
    assert err.kernel == kernel.name and err.loc is not None
    assert err.loc.source_line().startswith("if ")


# ---- persistent loops: td.tile(...)[p::P] ------------------------------------------------------
PROGRAMS = 3


@td.tile_kernel
def strided_scale(x):
    """Each of PROGRAMS programs scales every PROGRAMS-th (tm, tn) tile from its own, counting
    the tiles it took into `taken` (a value the strided loop carries)."""
    m, n = x.shape
    out = td.empty((m, n), dtype=x.dtype)
    taken = td.empty((PROGRAMS,), dtype=td.int32)
    for p in td.grid(PROGRAMS):
        count = 0
        for tm, tn in td.tile(m, n)[p::PROGRAMS]:
            out[tm, tn] = x[tm, tn] * 3
            count += 1
        taken[p] = count
    return out, taken


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_strided_loop_visits_each_tile_once(backend: str) -> None:
    x = np.random.default_rng(3).standard_normal((37, 23)).astype(np.float32)
    for config, (out, taken) in under_configs(strided_scale, (x,), backend, samples=3):
        bm, bn = config.block_sizes
        tiles = -(-37 // bm) * -(-23 // bn)
        np.testing.assert_array_equal(out, x * 3)
        assert taken.tolist() == [len(range(p, tiles, PROGRAMS)) for p in range(PROGRAMS)]
    text = strided_scale.source(x, target="ir")
    assert "{ranges = 2, stride = 3}" in text
    fn = parse_ir(text)
    verify(fn)
    assert canonical(parse_ir(print_ir(fn))) == canonical(fn)
    src = strided_scale.source(x, target="triton", config=Config((16, 16)))
    assert "for tile_id in range(begin_p, 6, 3):" in src and "pid_tn = tile_id % 2" in src


@td.tile_kernel
def strided_on_the_host(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0])[0::2]:
        out[t] = x[t]
    return out


@td.tile_kernel
def strided_with_a_stop(x):
    out = td.empty_like(x)
    for p in td.grid(2):
        for t in td.tile(x.shape[0])[p:4:2]:
            out[t] = x[t]
    return out


@td.tile_kernel
def strided_by_a_runtime_step(x, step):
    out = td.empty_like(x)
    for p in td.grid(2):
        for t in td.tile(x.shape[0])[p::step]:
            out[t] = x[t]
    return out


@pytest.mark.parametrize("kernel, args, words", [
    (strided_on_the_host, (), "runs inside a grid"),
    (strided_with_a_stop, (), "takes no stop"),
    (strided_by_a_runtime_step, (2,), "must be a positive int"),
], ids=["host", "stop", "runtime-step"])
def test_bad_strided_loops_are_clear_errors(kernel: td.TileKernel, args: tuple,
                                            words: str) -> None:
    with pytest.raises(td.TraceError, match=words) as info:
        kernel(np.ones(8, np.float32), *args)
    assert info.value.loc is not None and "td.tile(" in info.value.loc.source_line()
    assert "[p::P]" in (info.value.hint or "")




@td.tile_kernel
def first_blocks(V, n_blocks, MAX_BLOCKS: td.constexpr):
    """Liger's attn_res backward: `for i in tl.static_range(MAX_BLOCKS): if i < n_blocks:`
    stores `dV[i, ...]`, whose constant i may lie past V's blocks where the branch never runs."""
    out = td.zeros_like(V)
    for tok in td.grid(V.shape[1]):
        for i in td.static_range(0, MAX_BLOCKS):
            if i < n_blocks:
                out[i, tok, :] = 2.0 * V[i, tok, :]
    return out


def test_a_constant_index_past_the_tensor_under_a_runtime_if_is_checked_when_it_runs() -> None:
    V = np.random.default_rng(21).standard_normal((5, 7, 9)).astype(np.float32)
    for backend in ("numpy", "triton-interpret"):
        np.testing.assert_array_equal(first_blocks.run(V, 3, 8, backend=backend)[:3], 2 * V[:3])
        np.testing.assert_array_equal(first_blocks.run(V, 5, 8, backend=backend), 2 * V)
    with pytest.raises(td.OutOfBoundsError, match="index 5 is out of bounds for dimension 0"):
        first_blocks.run(V, 6, 8, backend="numpy")  # the branch runs for i = 5


@td.tile_kernel
def doubled_in_range(x, B: td.constexpr):
    """Triton's `mask = offs < n and offs >= 0` (FlagGems): `and`, `or` and `not` of bool
    tiles are elementwise."""
    n = x.shape[0]
    out = td.zeros_like(x)
    for pid in td.grid(td.cdiv(n, B)):
        offs = pid * B + td.arange(0, B)
        mask = offs < n and offs >= 0
        keep = (not (offs % 3 != 0)) or not_first(offs)
        td.store(out, [offs], td.where(keep, td.load(x, [offs], mask=mask) * 2, 0.0), mask=mask)
    return out


def not_first(offs):
    return offs > 7 and offs < 11


def test_and_or_of_bool_tiles_outside_an_if_are_elementwise() -> None:
    x = np.random.default_rng(27).standard_normal(37).astype(np.float32)
    i = np.arange(37)
    want = np.where((i % 3 == 0) | ((i > 7) & (i < 11)), 2 * x, 0)
    for backend in BACKENDS:
        np.testing.assert_array_equal(doubled_in_range.run(x, 16, backend=backend), want)

    @td.tile_kernel
    def of_floats(x):
        for t in td.tile(x.shape[0]):
            x[t] = x[t] and x[t] + 1.0

    with pytest.raises(td.ControlFlowError, match="takes two bool tiles") as e:
        of_floats(x.copy())
    assert "`&` / `|`" in e.value.hint
