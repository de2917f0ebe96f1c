"""Globals and closure variables a kernel reads are keyed by value (tiledsl/frontend/reads.py): after
`SCALE = 5.0` the next call traces again, on every backend, and the caches built on the trace
(Triton's generated module, the result cache's key, the tuner's check) see the new value."""

from __future__ import annotations

import types

import numpy as np
import pytest

import tiledsl as td
from autotune import cache
from tiledsl.frontend import reads

SCALE = 2.0
EPS = 1.0
settings = types.ModuleType("settings")  # a module the kernel reads an attribute of
settings.OFFSET = 0.5
W = np.ones(3, np.float32)


def shifted(v):  # a helper of the user's code: what it reads is read too
    return v + EPS + settings.OFFSET


@td.tile_kernel
def scaled(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = shifted(x[t] * SCALE)
    return out


@td.tile_kernel
def padded(x):  # reads the shape of a global array: keyed by the array's identity
    out = td.empty((x.shape[0] + W.shape[0],), dtype=x.dtype)
    for t in td.tile(out.shape[0]):
        out[t] = td.zeros((t,), dtype=x.dtype)
    return out


def _with(**values: object) -> None:
    globals().update(values)


@pytest.fixture(autouse=True)
def _restore() -> object:
    yield
    _with(SCALE=2.0, EPS=1.0, W=np.ones(3, np.float32))
    settings.OFFSET = 0.5


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret", "spatial"])
def test_a_changed_global_traces_again_on_every_backend(backend: str) -> None:
    x = np.random.default_rng(0).standard_normal(37).astype(np.float32)
    space = scaled.config_space(x, backend=backend)
    for scale, eps, offset in ((2.0, 1.0, 0.5), (5.0, -3.0, 0.25), (2.0, 1.0, 0.5)):
        _with(SCALE=scale, EPS=eps)
        settings.OFFSET = offset
        want = x.astype(np.float64) * scale + eps + offset
        for config in (space.default(), *space.sample(1, seed=1)):
            got = scaled.run(x, backend=backend, config=config)
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5, err_msg=f"{scale, eps, offset}")


def test_what_is_keyed_and_the_caches_that_see_it() -> None:
    x = np.ones(37, np.float32)
    first, key, source = scaled.traced(x), cache.key(scaled, [x], "numpy"), \
        scaled.source(x, target="triton")
    assert "* 2.0" in source
    _with(SCALE=5.0)
    assert scaled.traced(x) is not first and "* 5.0" in scaled.source(x, target="triton")
    assert cache.key(scaled, [x], "numpy") != key  # the result cache and the tuner's check
    _with(SCALE=2.0)
    assert scaled.traced(x) is first  # a value seen before: its trace was kept
    assert cache.key(scaled, [x], "numpy") == key
    assert "shifted=<function shifted" in reads.text(scaled.fn)
    assert "{EPS=1.0; settings.OFFSET=0.5}>; SCALE=2.0" in reads.text(scaled.fn)
    # an array is keyed by identity: another array traces again; a change inside it is not seen
    assert padded(x).shape == (40,)
    W[0] = 7.0
    assert padded.traced(x) is padded.traced(x)
    _with(W=np.ones(5, np.float32))
    assert padded(x).shape == (42,)


def test_closure_variables_and_function_arguments_are_read_as_they_are_now() -> None:
    factor = 2.0

    @td.tile_kernel
    def times(x, epilogue):
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            out[t] = epilogue(x[t] * factor)
        return out

    x = np.ones(5, np.float32)
    add_eps = lambda v: v + EPS  # noqa: E731 - a compile-time argument reading a global
    assert times(x, add_eps)[0] == 3.0
    factor = 4.0
    assert times(x, add_eps)[0] == 5.0
    _with(EPS=10.0)
    assert times(x, add_eps)[0] == 14.0


def test_the_tuners_processes_refuse_a_kernel_whose_globals_differ(tmp_path) -> None:
    from autotune.runners import load_kernel
    path = tmp_path / "k.py"
    path.write_text("import tiledsl as td\nSCALE = 2.0\n\n@td.tile_kernel\ndef k(x):\n"
                    "    out = td.empty_like(x)\n    for t in td.tile(x.shape[0]):\n"
                    "        out[t] = x[t] * SCALE\n    return out\n")
    tuned = load_kernel(str(path), "k")  # the tuning process's kernel
    load_kernel(str(path), "k", tuned.source_digest)  # another process imports the same
    tuned.fn.__globals__["SCALE"] = 5.0  # set at run time: the file still says 2.0
    with pytest.raises(td.TileDSLError, match="a global or closure variable it reads differs"):
        load_kernel(str(path), "k", tuned.source_digest)
