"""Configs and the config space the compiler derives from a kernel."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tiledsl as td
from tiledsl.config import Constraint, Param


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
    ({"group_m": [1, 2]}, "knob 'group_m' must be a bool, int, float or string"),
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


def test_numpy_backend_prefers_big_blocks_by_default() -> None:
    generic = matmul.config_space(A, B).default()
    numpy_default = matmul.config_space(A, B, backend="numpy").default()
    assert generic == td.Config((64, 8))
    assert numpy_default == td.Config((512, 8))


def test_knobs_left_out_take_their_defaults() -> None:
    space = matmul.config_space(A, B).with_param(Param("num_warps", (4, 8), 8))
    partial = td.Config((64, 4))
    assert partial in space and space.reason(partial) is None
    assert space.validate(partial) == td.Config((64, 4), num_warps=8)


def test_an_empty_space_says_which_constraints_reject_its_default() -> None:
    from tiledsl.config import ConfigSpace

    space = ConfigSpace("k", (Param("block_sizes[0]", (16, 32), 16),)).with_constraint(
        Constraint("smem", lambda c: f"needs {c.block_sizes[0] * 4096} bytes of shared memory"))
    with pytest.raises(td.ConfigError, match=r"in kernel 'k': the config space is empty(.|\n)*"
                       r"block_sizes=\(16,\).*needs 65536 bytes of shared memory"):
        space.default()
