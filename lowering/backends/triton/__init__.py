"""The Triton backend: generated Triton source, run by Triton's interpreter on the CPU
(`triton-interpret`) or launched on NVIDIA GPUs (`triton`), and compiled ahead of time to PTX
and cubin on any machine."""

from __future__ import annotations

from lowering.backends.triton import gpu as gpu
from lowering.backends.triton import interpret as interpret
from lowering.backends.triton import targets as targets
