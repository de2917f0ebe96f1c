"""Arguments in every layout NumPy makes, read and written in place on every backend: negative
strides (`x[::-1]`), steps, transposes, Fortran order; zero strides (`np.broadcast_to`) and
overlapping rows (`as_strided`) may be read, and writing into them is an ArgumentError."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

import tiledsl as td

BACKENDS = ["numpy", "triton-interpret", "spatial"]
M, N = 13, 7
Layout = Callable[[np.ndarray], np.ndarray]


@td.tile_kernel
def axpy_(x, y):
    m, n = x.shape
    for tm, tn in td.tile(m, n):
        x[tm, tn] = x[tm, tn] + 2.0 * y[tm, tn]


@td.tile_kernel
def axpy_t_(x, y):  # writes x through a view of it
    xt = x.T
    for tn, tm in td.tile(x.shape[1], x.shape[0]):
        xt[tn, tm] = xt[tn, tm] + 2.0 * y[tm, tn].T


def _big(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


# layouts of an (M, N) array, each made from fresh random memory
WRITTEN: dict[str, Callable[[np.random.Generator], np.ndarray]] = {
    "rows-reversed": lambda rng: _big(rng, (M, N))[::-1],
    "both-reversed": lambda rng: _big(rng, (M, N))[::-1, ::-1],
    "reversed-stepped": lambda rng: _big(rng, (2 * M, 3 * N))[::-2, 1::3],
    "transposed": lambda rng: _big(rng, (N, M)).T,
    "fortran": lambda rng: np.asfortranarray(_big(rng, (M, N))),
}
READ: dict[str, Callable[[np.random.Generator], np.ndarray]] = {
    **WRITTEN,
    "broadcast": lambda rng: np.broadcast_to(_big(rng, (1, N)), (M, N)),  # strides (0, 4)
    "overlapping": lambda rng: np.lib.stride_tricks.as_strided(  # row i starts at element 2i
        _big(rng, (2 * M + N,)), (M, N), (8, 4)),
}


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_layout_is_read_and_written_in_place(backend: str) -> None:
    rng = np.random.default_rng(0)
    reads = list(READ.items())
    for i, (name, make_x) in enumerate(WRITTEN.items()):
        kernel = axpy_t_ if i % 2 else axpy_
        y_name, make_y = reads[(i + 3) % len(reads)]  # each read layout meets a written one
        y = make_y(rng)
        space = kernel.config_space(make_x(rng), y, backend=backend)
        for config in (space.default(), *space.sample(1, seed=i)):
            x = make_x(rng)
            want = x.astype(np.float64) + 2.0 * y.astype(np.float64)
            kernel.run(x, y, backend=backend, config=config)
            np.testing.assert_allclose(x, want, rtol=1e-6, atol=1e-6,
                                       err_msg=f"{kernel.name}: x {name}, y {y_name}, {config}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_writing_into_elements_that_share_memory_is_an_error(backend: str) -> None:
    rng = np.random.default_rng(1)
    y = _big(rng, (M, N))
    for name in ("overlapping", "broadcast"):
        x = READ[name](rng)
        x = np.lib.stride_tricks.as_strided(x.base if name == "broadcast" else x, x.shape,
                                            x.strides, writeable=True)
        for kernel in (axpy_, axpy_t_):
            with pytest.raises(td.ArgumentError, match=f"in kernel '{kernel.name}': the kernel "
                               r"writes argument 'x' in place, but its elements share memory "
                               rf"\(strides \({x.strides[0]}, 4\) in bytes"):
                kernel.run(x, y, backend=backend)
    assert axpy_t_.written_args(y, y.copy()) == ["x"]  # a write through a view writes its root


def test_overlap_is_exact_for_layouts_the_stride_rule_cannot_prove() -> None:
    from tiledsl.interop.arrays import overlaps_itself
    assert not overlaps_itself((2, 3), (12, 8), 4)  # offsets 0 8 16 12 20 28 (bytes)
    assert overlaps_itself((2, 3), (8, 4), 4)  # 0 4 8 8 12 16
    assert overlaps_itself((3,), (2,), 4)  # 4-byte items 2 bytes apart overlap in part
    assert not overlaps_itself((5, 1, 4), (-16, 0, 4), 4)  # size-1 dimensions take any stride


def test_export_refuses_a_written_argument_whose_elements_share_memory(tmp_path) -> None:
    x = np.lib.stride_tricks.as_strided(np.zeros(2 * M + N, np.float32), (M, N), (8, 4))
    with pytest.raises(td.ArgumentError, match="writes argument 'x' in place, but its elements "
                       "share memory"):  # td.load would accept the layout it was exported for
        axpy_.export(tmp_path / "pkg", x, np.ones((M, N), np.float32))
    assert not (tmp_path / "pkg").exists()
