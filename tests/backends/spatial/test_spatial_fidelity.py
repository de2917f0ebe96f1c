"""The spatial model's matrix-unit terms (issue 33): math fidelity (passes through the matrix
unit a dtype's product takes) and the operand feed's bandwidth; the architecture JSON that
carries them, old JSON without them, and the Blackhole preset of the validation benchmark."""

from __future__ import annotations

import dataclasses
import json

import ml_dtypes
import numpy as np
import pytest

import tiledsl as td
from lowering.backends.spatial.arch import Arch, preset
from support import kernel_of

A = np.ones((256, 256), ml_dtypes.bfloat16)  # only shapes and dtypes matter to the simulator
CONFIG = td.Config((64, 64, 64), fold="rows", buffer_depth=2, multicast=True)


def _cycles(arch: Arch) -> tuple[float, float]:
    """Simulated and estimated cycles of a 256^3 bf16 GEMM under CONFIG."""
    matmul = kernel_of("matmul")
    space = matmul.config_space(A, A, backend="spatial", arch=arch)
    return matmul.simulate(A, A, arch=arch, config=CONFIG).cycles, space.estimate(CONFIG)


def test_higher_math_fidelity_takes_more_cycles_in_simulator_and_estimate() -> None:
    wormhole = preset("wormhole-like")
    assert wormhole.math_fidelity["bf16"] == 2 and wormhole.mac_rate("bf16") == 1024
    lofi, hifi4 = (dataclasses.replace(wormhole, math_fidelity={"bf16": p}, feed_bytes_per_cycle=0)
                   for p in (1, 4))
    (sim_lo, est_lo), (sim_hi, est_hi) = _cycles(lofi), _cycles(hifi4)
    # 256^3 MACs over 64 PEs at 2048 (LoFi) or 512 (HiFi4) MACs a cycle: 128 or 512 cycles of
    # compute per PE; the rest (loads, latency) is the same
    assert sim_hi - sim_lo >= 0.9 * (512 - 128) and est_hi - est_lo >= 0.9 * (512 - 128)
    assert hifi4.peak_macs("bf16") == lofi.peak_macs("bf16") / 4


def test_operand_feed_limits_the_matrix_unit() -> None:
    free = dataclasses.replace(preset("wormhole-like"), feed_bytes_per_cycle=0.0)
    # a 64^3 bf16 step feeds 64*64*(64/16)*2 + 64*64*(64/8)*2 = 98,304 bytes: at 8 B/cycle,
    # 12,288 cycles a step (256 of compute at HiFi2, far more than its loads); a program takes
    # 4 steps (k = 256), and each PE runs one
    assert free.feed_bytes(64, 64, 64, 2, 2) == 98_304
    narrow = dataclasses.replace(free, feed_bytes_per_cycle=8.0)
    (sim_free, est_free), (sim_narrow, est_narrow) = _cycles(free), _cycles(narrow)
    assert sim_free < 4 * 12_288 <= min(sim_narrow, est_narrow)
    with pytest.raises(td.ConfigError, match="feed_bytes_per_cycle must be a number of at least 0"):
        dataclasses.replace(free, feed_bytes_per_cycle=-1.0)
    with pytest.raises(td.ConfigError, match=r"math_fidelity must be a dict of matrix-unit passes"):
        dataclasses.replace(free, math_fidelity={"bf16": 5})


def test_arch_json_round_trips_the_new_fields_and_old_json_still_loads() -> None:
    wormhole = preset("wormhole-like")
    assert Arch.from_json(wormhole.to_json()) == wormhole
    old = json.loads(wormhole.to_json())
    del old["math_fidelity"], old["feed_bytes_per_cycle"]  # as written before these existed
    loaded = Arch.from_dict(old)
    assert loaded.math_fidelity == {} and loaded.feed_bytes_per_cycle == 0.0
    assert loaded.mac_rate("bf16") == wormhole.macs_per_cycle["bf16"]  # one pass


def test_blackhole_preset_cites_the_measurements_it_is_checked_against() -> None:
    blackhole = preset("blackhole-like")
    assert (blackhole.rows, blackhole.cols, blackhole.clock_ghz) == (10, 13, 1.35)
    assert "GEMM_FLOPS" in blackhole.sources["math_fidelity"]
    assert Arch.from_json(blackhole.to_json()) == blackhole
    assert preset("wormhole-like").sources["feed_bytes_per_cycle"].startswith("fitted:")
