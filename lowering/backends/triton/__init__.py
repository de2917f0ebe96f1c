"""The Triton backend: generated Triton source, run by Triton's interpreter on the CPU
(`triton-interpret`) or compiled for NVIDIA GPUs (`triton`)."""

from __future__ import annotations

from lowering.backends.triton import interpret as interpret
from lowering.backends.triton import targets as targets
