"""Backends register themselves on import; add one line here per backend."""

from lowering.backends import numpy as numpy
from lowering.backends import spatial as spatial
from lowering.backends import triton as triton
