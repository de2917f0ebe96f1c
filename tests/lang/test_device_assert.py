"""`td.device_assert` and Python's `assert` on a tile value (tiledsl/lang/asserts.py): checked
on every lane in range by the NumPy and spatial backends, lanes past a ragged edge, masked
lanes and programs that skip a runtime `if` left out; `tl.device_assert` in Triton's code;
assertions on Python values keep Python's meaning."""

from __future__ import annotations

import numpy as np
import pytest
from support import run_on, under_configs

import tiledsl as td

CHECKING = ["numpy", "spatial"]


@td.tile_kernel
def checked_gather(x, idx, n):
    """FlagGems' index_add asserts its indices; repeat_interleave asserts repeats >= 0."""
    out = td.empty(idx.shape, dtype=x.dtype)
    for t in td.tile(idx.shape[0]):
        i = idx[t]
        assert i >= 0 and i < n, "0 <= index < self.size(dim)"
        v = td.load(x, [i])
        td.device_assert(v > 0, "positive", mask=i != 3)  # ragged lanes' poison is not v
        out[t] = v
    for p in td.grid(idx.shape[0]):
        if idx[p] < 5:  # only these programs check
            td.device_assert(idx[p] < 5, "guarded")
    return out


def _inputs(bad: str = "") -> tuple:
    rng = np.random.default_rng(3)
    x = rng.uniform(0.5, 2.0, 29).astype(np.float32)
    idx = rng.integers(0, 29, 37).astype(np.int64)
    if bad == "index":
        idx[17] = 29
    if bad == "value":
        x[idx[5]] = -1.0
    if bad == "masked":
        idx[5] = 3
        x[3] = -1.0  # only where the mask leaves it out
    return x, idx, 29


@pytest.mark.parametrize("backend", CHECKING)
def test_assertions_that_hold_pass_under_every_config(backend: str) -> None:
    for bad in ("", "masked"):
        x, idx, n = _inputs(bad)
        for config, out in under_configs(checked_gather, (x, idx, n), backend):
            np.testing.assert_array_equal(out, x[idx], err_msg=str(config))


@pytest.mark.parametrize("backend", CHECKING)
def test_a_failed_assertion_names_its_line_and_message(backend: str) -> None:
    with pytest.raises(td.DeviceAssertionError, match="self.size") as e:
        run_on(checked_gather, _inputs("index"), backend)
    assert 'assert i >= 0 and i < n, "0 <= index < self.size(dim)"' in str(e.value)
    with pytest.raises(td.DeviceAssertionError, match="positive"):
        run_on(checked_gather, _inputs("value"), backend)
    assert isinstance(e.value, AssertionError) and "checked_gather" in str(e.value)


def test_triton_gets_device_assert_and_compiles_for_sm90() -> None:
    pytest.importorskip("triton")
    x, idx, n = _inputs()
    src = checked_gather.source(x, idx, n, target="triton")
    assert "tl.device_assert(" in src and "'0 <= index < self.size(dim)')" in src
    (report, *_) = checked_gather.compile(x, idx, n, arch="sm_90")
    assert ".target sm_90" in report.ptx
    # Triton checks them only under TRITON_DEBUG=1; its interpreter never: the run goes on
    np.testing.assert_array_equal(run_on(checked_gather, _inputs(), "triton-interpret"),
                                  _inputs()[0][_inputs()[1]])


def test_assertions_on_python_values_are_python_s() -> None:
    @td.tile_kernel
    def sized(x, n):
        assert x.shape[0] % 2 == 1, f"odd rows, got {x.shape[0]}"
        assert n > 0  # a runtime int in host code: compile-time, as in an `if`
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            td.device_assert(x.shape[0] < 100, "small")
            out[t] = x[t] * n
        return out

    x = np.ones(37, np.float32)
    np.testing.assert_array_equal(sized(x, 2), 2 * x)
    with pytest.raises(td.TraceError, match="odd rows, got 38"):
        sized(np.ones(38, np.float32), 2)
    with pytest.raises(td.TraceError, match="AssertionError"):
        sized(x, 0)
    with pytest.raises(td.TraceError, match="fails on every run: small"):
        sized(np.ones(101, np.float32), 2)
