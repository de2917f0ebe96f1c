"""`@td.tile_kernel(...)` with options, as Helion's `@helion.kernel(config=..., static_shapes=...)`
decorates every example: a pinned config, the called form, and clear errors for the rest."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td


def _scale(x):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] * 3.0
    return out


X = np.random.default_rng(0).standard_normal(37).astype(np.float32)


def test_the_called_forms_make_the_same_kernel() -> None:
    for make in (td.tile_kernel(), td.tile_kernel(static_shapes=True),
                 td.tile_kernel(static_shapes=False)):
        np.testing.assert_array_equal(make(_scale)(X), X * 3.0)


@pytest.mark.parametrize("backend", ["numpy", "triton-interpret"])
def test_a_pinned_config_is_every_call_s_config(backend: str) -> None:
    k = td.tile_kernel(config=td.Config(block_sizes=[16], num_warps=2))(_scale)
    default = k.config_space(X, backend=backend).default()
    assert default.block_sizes == (16,)  # (the space's own default is 64)
    assert default.num_warps == (2 if backend != "numpy" else None)  # NumPy has no warps
    np.testing.assert_array_equal(k.run(X, backend=backend), X * 3.0)
    if backend != "numpy":
        assert "block_sizes=(16,), num_warps=2" in k.source(X, target="triton")
    with pytest.raises(td.ConfigError, match="pins its config"):
        k.autotune(X, backend=backend)


@pytest.mark.parametrize("options, cls, words", [
    ({"autotune_efort": "none"}, td.TraceError, "unknown option 'autotune_efort'"),
    ({"config": {"block_sizes": [16]}}, td.TraceError, "takes a td.Config"),
    ({"static_shapes": "yes"}, td.TraceError, "True or False"),
    ({"configs": [{"block_sizes": [16]}]}, td.TraceError, "a list of td.Config"),
    ({"configs": [td.Config([16])], "config": td.Config([16])}, td.TraceError, "not with config="),
], ids=["unknown", "dict-config", "static-shapes", "dict-configs", "both"])
def test_bad_options_say_what_they_take(options: dict, cls: type, words: str) -> None:
    with pytest.raises(cls, match=words):
        td.tile_kernel(**options)(_scale)


def test_helion_s_settings_are_taken_and_its_first_config_pins() -> None:
    """Helion's examples decorate with settings (helion_settings.py) and `configs=[...]`, and
    rebuild a kernel from `k.fn` and `k.configs`."""
    k = td.tile_kernel(ignore_warnings=[UserWarning], autotune_effort="none",
                       dot_precision="ieee", autotune_baseline_fn=lambda x: x * 3.0,
                       configs=[td.Config(block_sizes=[16]), td.Config(block_sizes=[32])])(_scale)
    assert k.settings["autotune_effort"] == "none" and len(k.configs) == 2
    assert k.config_space(X, backend="numpy").default().block_sizes == (16,)
    again = td.tile_kernel(k.fn, configs=k.configs)
    np.testing.assert_array_equal(again(X), X * 3.0)
    unpinned = td.tile_kernel(td.tile_kernel(_scale).fn, configs=[])  # (Helion's attention)
    assert unpinned.pinned is None and unpinned.configs == []
    np.testing.assert_array_equal(unpinned(X), X * 3.0)


def test_a_pinned_config_that_does_not_fit_names_the_kernel_s_tiles() -> None:
    k = td.tile_kernel(config=td.Config([16, 16]))(_scale)
    with pytest.raises(td.ConfigError, match="2 block sizes given") as e:
        k(X)
    assert "tile 't' over 37" in str(e.value) and "kernel '_scale'" in str(e.value)


def test_helion_s_config_knobs_and_wide_warps_pin() -> None:
    """Helion's longsum pins `reduction_loops=[None]` (a list: kept, JSON and hashable; a knob
    of Helion's that tiledsl has not changes nothing) and `num_warps=32, num_stages=5`, which
    Triton compiles though tiledsl's search does not try them."""
    c = td.Config(block_sizes=[16], reduction_loops=[None], loop_orders=[[1, 0]], num_warps=32,
                  num_stages=5, indexing="block_ptr")
    assert td.Config.from_json(c.to_json()) == c and hash(c) == hash(td.Config.from_json(
        c.to_json())) and c.to_dict()["loop_orders"] == [[1, 0]]
    k = td.tile_kernel(config=c)(_scale)
    default = k.config_space(X, backend="triton").default()
    assert (default.num_warps, default.num_stages) == (32, 5)
    np.testing.assert_array_equal(k.run(X, backend="triton-interpret"), X * 3.0)
    with pytest.raises(td.ConfigError, match=r"num_warps = 3 is not one of \[2, 4, 8\] \(warps per program; "
                       r"a config may also name \[1, 16, 32\]\)"):
        td.tile_kernel(config=td.Config(block_sizes=[16], num_warps=3))(_scale).config_space(
            X, backend="triton").default()


def test_a_pinned_block_past_the_dimension_covers_it_and_a_call_s_config_wins() -> None:
    """Helion's longsum_manual pins a block of 32768 for its 130000 columns: over 37 elements
    that is the one tile the largest choice (64) makes. A pin that does not fit at all fails
    only the calls that use it: a call's own config runs."""
    wide = td.tile_kernel(config=td.Config(block_sizes=[32768]))(_scale)
    assert wide.config_space(X, backend="numpy").default().block_sizes == (64,)
    np.testing.assert_array_equal(wide.run(X, backend="triton-interpret"), X * 3.0)
    unfit = td.tile_kernel(config=td.Config([16, 16]))(_scale)
    np.testing.assert_array_equal(unfit.run(X, config=td.Config([8])), X * 3.0)
    with pytest.raises(td.ConfigError, match="2 block sizes given") as e:
        unfit.run(X)
    assert "or pass config= to the call" in e.value.hint
