"""An `assert` in host code on the kernel's data (a one-element tensor, or its `.item()`:
Liger's `assert (target * target_mask).max() < _input.shape[-1]`): a grid of one program that
loads the value and asserts it on the device (`td.device_assert`), so the NumPy and spatial
backends check it on every run and Triton under TRITON_DEBUG=1. asserts.py's `check` calls it
through `asserts.on_data`, set here: the grid loops import asserts.py, for the rewrite.
"""

from __future__ import annotations

from tiledsl.frontend.host_scalars import HostScalar
from tiledsl.frontend.loops import loop
from tiledsl.lang import asserts
from tiledsl.lang.language import grid


def assert_on_device(value: HostScalar, msg: str, line: int) -> None:
    """Assert `value` in a grid of one program, at the assert's `line`."""
    def body(_: object, env: dict) -> dict:
        asserts.device_assert(value.load(), msg)
        return {}
    loop(grid(1), body, {}, (), None, line)


asserts.on_data = assert_on_device
