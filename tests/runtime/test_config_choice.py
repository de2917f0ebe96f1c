"""Without a `config=`, every kernel method uses the result cache's tuned config, else the
space's default: `k(*args)`/`k.run`, and also `k.simulate`, `k.source`, `k.compile` and
`k.warm`, so that what is simulated, shown and compiled is what runs."""

from __future__ import annotations

import numpy as np
import pytest

import tiledsl as td
from support import example

MOD = example("softmax")
ARGS = MOD.make_inputs(np.random.default_rng(0), {"m": 37, "n": 70})


def test_simulate_and_source_use_the_tuned_config(monkeypatch: pytest.MonkeyPatch) -> None:
    k = MOD.softmax
    space = k.config_space(*ARGS, backend="spatial")
    default = space.default()
    tuned = next(c for c in space.sample(8, seed=1) if c.block_sizes != default.block_sizes)
    untuned = k.simulate(*ARGS).cycles
    gpu = td.Config((8,), num_warps=2, num_stages=3)
    monkeypatch.setattr(k, "tuned_config", lambda values, spec, backend, arch, space:
                        tuned if backend == "spatial" else gpu)
    assert k.simulate(*ARGS).cycles == k.simulate(*ARGS, config=tuned).cycles != untuned
    assert k.source(*ARGS, target="spatial") == k.source(*ARGS, target="spatial", config=tuned)
    assert k.source(*ARGS, target="triton") == k.source(*ARGS, target="triton", config=gpu)
    assert k.source(*ARGS, target="triton") != k.source(*ARGS, target="triton",
                                                         config=td.Config((16,), num_warps=2))
    assert k.simulate(*ARGS, config=default).cycles == untuned  # a given config still wins
