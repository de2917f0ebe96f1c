"""Configs and the config space the compiler derives from a kernel."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tiledsl as td
from tiledsl.runtime.config import Constraint, Param


@td.tile_kernel
def matmul(a, b):
    m, k = a.shape
    _, n = b.shape
    out = td.empty((m, n), dtype=a.dtype)
    for tm, tn in td.tile(m, n):
        acc = td.zeros((tm, tn))
        for tk in td.tile(k, block_size=16):
            acc += a[tm, tk] @ b[tk, tn]
        out[tm, tn] = acc
    return out


A = np.random.default_rng(0).standard_normal((300, 48)).astype(np.float32)
B = np.random.default_rng(1).standard_normal((48, 5)).astype(np.float32)


def test_config_is_hashable_and_round_trips_json() -> None:
    c = td.Config(block_sizes=(64, 32), num_warps=4, num_stages=3, group_m=8)
    assert td.Config.from_json(c.to_json()) == c
    assert hash(td.Config.from_json(c.to_json())) == hash(c)
    assert td.Config.from_dict(c.to_dict()) == c
    assert c.get("group_m") == 8 and c.get("num_warps") == 4 and c.get("missing", 1) == 1
    assert len({c, td.Config((64, 32), 4, 3, group_m=8), td.Config((64, 16))}) == 2
    assert "group_m=8" in repr(c)


@pytest.mark.parametrize("fields, message", [
    ({"group_m": [1, {"a": 2}]}, "knob 'group_m' must be a bool, int, float, string or None, "
                                 "or a list of them"),
    ({"split": [1.0, float("inf")]}, "a finite float"),
    ({"tma": {"on": True}}, "knob 'tma' must be"),
    ({"num_warps": 4.0}, "num_warps must be an int"),
    ({"num_stages": "3"}, "num_stages must be an int"),
    ({"num_warps": True}, "num_warps must be an int")])
def test_configs_that_could_not_hash_or_round_trip_are_refused(fields: dict,
                                                               message: str) -> None:
    with pytest.raises(td.ConfigError, match=message):
        td.Config((64,), **fields)
    with pytest.raises(td.ConfigError, match=message):
        td.Config.from_dict({"block_sizes": [64], **fields})


def test_space_has_one_block_per_tunable_tile_dimension() -> None:
    space = matmul.config_space(A, B)
    assert space.num_blocks == 2  # tk's block size is fixed at 16
    m_param, n_param = space.params
    assert m_param.choices == tuple(2**i for i in range(10))  # up to next_pow2(300) = 512
    assert n_param.choices == (1, 2, 4, 8)  # next_pow2(5) = 8
    assert "tile 'tm' over 300" in m_param.doc and "tile 'tn' over 5" in n_param.doc
    assert len(space) == 40 == len(list(space))
    assert space.default() in space


def test_sample_is_seeded_distinct_and_valid() -> None:
    space = matmul.config_space(A, B)
    s1, s2 = space.sample(7, seed=3), space.sample(7, seed=3)
    assert s1 == s2 and len(set(s1)) == 7 and all(c in space for c in s1)
    assert space.sample(7, seed=4) != s1
    assert len(space.sample(1000, seed=0)) == len(space)


@pytest.mark.parametrize("config, message", [
    (td.Config((64,)), "1 block sizes given, the kernel has 2"),
    (td.Config((64, 3)), "not a power of two"),
    (td.Config((1024, 4)), "not one of"),
    (td.Config((64, 4), bogus=1), "unknown knobs"),
])
def test_invalid_configs_are_rejected(config: td.Config, message: str) -> None:
    space = matmul.config_space(A, B)
    assert config not in space
    with pytest.raises(td.ConfigError, match=message) as info:
        matmul.run(A, B, config=config)
    assert "matmul" in str(info.value)


@pytest.mark.parametrize("backend, knob, value", [("triton", "group_m", True),
                                                   ("triton", "group_m", False),
                                                   ("spatial", "multicast", 1)])
def test_a_knob_value_equal_to_a_choice_of_another_type_is_rejected(backend: str, knob: str,
                                                                    value: Any) -> None:
    """True == 1 in Python, but `group_m=True` or `multicast=1` is a slip."""
    space = matmul.config_space(A, B, backend=backend)
    config = space.default().replace(**{knob: value})
    assert f"{knob} = {value!r} is not one of" in (space.reason(config) or "")
    assert config not in space


def test_every_config_gives_the_same_answer() -> None:
    ref = A.astype(np.float64) @ B
    for config in matmul.config_space(A, B):
        td.testing.assert_close(matmul.run(A, B, config=config), ref, np.float32)


def test_backends_extend_the_space_with_knobs_and_constraints() -> None:
    space = matmul.config_space(A, B)
    wide = space.with_param(Param("num_warps", (4, 8), 4))
    wide = wide.with_constraint(Constraint("small", lambda c: None if c.block_sizes[0] <= 64
                                           else "block too big"))
    assert len(wide) == 2 * 7 * 4
    assert all(c.get("num_warps") in (4, 8) for c in wide)
    assert "small: block too big" in (wide.reason(td.Config((128, 4), num_warps=4)) or "")
    assert wide.default().block_sizes[0] <= 64  # the nearest valid config to the defaults


@pytest.mark.parametrize("backend", ["triton", "spatial"])
def test_the_searchs_fast_membership_test_agrees_with_reason(backend: str) -> None:
    """`admits` (constraints and redundancy rules only, for configs made from the choices) says
    what `reason` and `duplicate` say, on every point of the product."""
    import itertools
    b = np.random.default_rng(2).standard_normal((48, 40)).astype(np.float32)
    space = matmul.config_space(A, b, backend=backend)
    names = [p.name for p in space.params]
    seen = {True: 0, False: 0}
    for combo in itertools.product(*(p.choices for p in space.params)):
        c = space.make(dict(zip(names, combo)))
        full = space.reason(c) is None and space.duplicate(c) is None
        assert space.admits(c) == full, c
        seen[full] += 1
    assert seen[True] and seen[False]


def test_numpy_backend_prefers_blocks_that_divide_the_extents() -> None:
    """Grid tiles the NumPy backend's dots take whole, so nothing is padded: the largest
    block that divides each extent (lowering/backends/numpy/defaults.py, dots.py)."""
    generic = matmul.config_space(A, B).default()
    numpy_default = matmul.config_space(A, B, backend="numpy").default()
    assert generic == td.Config((64, 8))
    extents = (A.shape[0], B.shape[1])
    assert all(n % b == 0 for n, b in zip(extents, numpy_default.block_sizes)), numpy_default


def test_knobs_left_out_take_their_defaults() -> None:
    space = matmul.config_space(A, B).with_param(Param("num_warps", (4, 8), 8))
    partial = td.Config((64, 4))
    assert partial in space and space.reason(partial) is None
    assert space.validate(partial) == td.Config((64, 4), num_warps=8)


def test_an_empty_space_says_which_constraints_reject_its_default() -> None:
    from tiledsl.runtime.config import ConfigSpace

    space = ConfigSpace("k", (Param("block_sizes[0]", (16, 32), 16),)).with_constraint(
        Constraint("smem", lambda c: f"needs {c.block_sizes[0] * 4096} bytes of shared memory"))
    with pytest.raises(td.ConfigError, match=r"in kernel 'k': the config space is empty(.|\n)*"
                       r"block_sizes=\(16,\).*needs 65536 bytes of shared memory"):
        space.default()


@td.tile_kernel
def tap_sums(x):
    """out[i] = sum over taps r and columns of x[r, i, :], the taps outer: one td.tile call
    traced once per tap."""
    taps, m, k = x.shape
    out = td.empty((m,), dtype=td.float32)
    for tm in td.tile(m):
        acc = td.zeros((tm,), dtype=td.float32)
        for r in range(taps):
            for tk in td.tile(k):
                acc += td.sum(x[r, tm, tk], axis=1)
        out[tm] = acc
    return out


@td.tile_kernel
def outer_sums(x):
    """out[i, j] = x[i] + x[j] through one helper call site cutting both loops (nested)."""
    n, = x.shape
    tiles = lambda: td.tile(n)  # noqa: E731
    out = td.empty((n, n), dtype=x.dtype)
    for ti in tiles():
        for tj in tiles():
            out[ti, tj] = x[ti][:, None] + x[tj][None, :]
    return out


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret", "spatial"])
def test_one_call_site_has_one_block_size(backend: str) -> None:
    """Three traces of `td.tile(k)` share one block size (the space has 2, not 4); a call site
    nested in itself (through a helper) gets one per level."""
    from support import under_configs
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 37, 50)).astype(np.float32)
    assert tap_sums.config_space(x, backend=backend).num_blocks == 2
    want = x.astype(np.float64).sum(axis=(0, 2))
    for _config, out in under_configs(tap_sums, (x,), backend):
        td.testing.assert_close(out, want, np.float32)
    v = rng.standard_normal(23).astype(np.float32)
    assert outer_sums.config_space(v).num_blocks == 2
    out = outer_sums.run(v, backend="numpy", config=td.Config((8, 16)))
    np.testing.assert_array_equal(out, v[:, None] + v[None, :])


@td.tile_kernel
def many_dots(x, w):
    """Ten nested tile loops, each a dot dimension: a product of 9e10 configs for Triton, of
    which the constraints accept about one in 4000 (tl.dot's blocks of 16 or more)."""
    m, k = x.shape
    out = td.empty((m, 16), dtype=td.float32)
    for tm in td.tile(m):
        acc = td.zeros((tm, 16), dtype=td.float32)
        for t0, t1, t2, t3, t4, t5, t6, t7, t8, t9 in td.tile(k, k, k, k, k, k, k, k, k, k):
            for t in (t0, t1, t2, t3, t4, t5, t6, t7, t8, t9):
                acc += x[tm, t] @ w[t, :]
        out[tm, :] = acc
    return out


def test_a_space_too_large_to_enumerate_never_hangs() -> None:
    import time
    x, w = np.ones((40, 40), np.float32), np.ones((40, 16), np.float32)
    plain = many_dots.config_space(x, w)
    assert len(plain) == plain.size_upper_bound == 7 ** 11  # no constraints: the product
    space = many_dots.config_space(x, w, backend="triton")
    start = time.monotonic()
    with pytest.raises(td.ConfigError, match="too many to count"):
        len(space)
    assert not space.countable and space.default() in space
    samples = space.sample(3, seed=0)
    assert len(set(samples)) == 3 and all(c in space for c in samples)
    assert space.sample(3, seed=0) == samples
    strict = space.with_constraint(Constraint("big-tm", lambda c: None if c.block_sizes[0] == 64
                                              else "tm must be 64"))
    assert strict.default().block_sizes[0] == 64  # the nearest valid config, found by search
    assert time.monotonic() - start < 30  # (enumerating would take weeks)
