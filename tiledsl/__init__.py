"""tiledsl: write a kernel once over tiles; run it on NumPy, lower it to GPUs and spatial arrays.

    import tiledsl as td

    @td.tile_kernel
    def add(x, y):
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            out[t] = x[t] + y[t]
        return out
"""

from tiledsl import philox as philox
from tiledsl import testing as testing
from tiledsl.aot import LoadedKernel as LoadedKernel
from tiledsl.atomics import atomic_add as atomic_add
from tiledsl.atomics import atomic_cas as atomic_cas
from tiledsl.atomics import atomic_max as atomic_max
from tiledsl.atomics import atomic_min as atomic_min
from tiledsl.atomics import atomic_xchg as atomic_xchg
from tiledsl.access import load as load  # in a kernel a masked load; outside, aot.load
from tiledsl.access import store as store
from tiledsl.config import Config as Config
from tiledsl.config import ConfigSpace as ConfigSpace
from tiledsl.dtypes import DType as DType
from tiledsl.dtypes import bfloat16 as bfloat16
from tiledsl.dtypes import bool_ as bool_
from tiledsl.dtypes import float16 as float16
from tiledsl.dtypes import float32 as float32
from tiledsl.dtypes import float64 as float64
from tiledsl.dtypes import float8_e4m3fn as float8_e4m3fn
from tiledsl.dtypes import float8_e5m2 as float8_e5m2
from tiledsl.dtypes import int8 as int8
from tiledsl.dtypes import int16 as int16
from tiledsl.dtypes import int32 as int32
from tiledsl.dtypes import int64 as int64
from tiledsl.dtypes import uint8 as uint8
from tiledsl.dtypes import uint16 as uint16
from tiledsl.dtypes import uint32 as uint32
from tiledsl.dtypes import uint64 as uint64
from tiledsl.errors import ArgumentError as ArgumentError
from tiledsl.errors import BackendError as BackendError
from tiledsl.errors import ConfigError as ConfigError
from tiledsl.errors import ControlFlowError as ControlFlowError
from tiledsl.errors import DTypeError as DTypeError
from tiledsl.errors import IRError as IRError
from tiledsl.errors import OutOfBoundsError as OutOfBoundsError
from tiledsl.errors import ShapeError as ShapeError
from tiledsl.errors import TileDSLError as TileDSLError
from tiledsl.errors import TileDSLWarning as TileDSLWarning
from tiledsl.errors import TraceError as TraceError
from tiledsl.kernel import TileKernel as TileKernel
from tiledsl.scans import argsort as argsort
from tiledsl.scans import associative_scan as associative_scan
from tiledsl.scans import sort as sort
from tiledsl.scans import topk as topk
from tiledsl.kernel import tile_kernel as tile_kernel
from tiledsl.language import abs as abs  # noqa: A004
from tiledsl.language import argmax as argmax
from tiledsl.language import argmin as argmin
from tiledsl.language import cumsum as cumsum
from tiledsl.language import astype as astype
from tiledsl.language import dot as dot
from tiledsl.language import empty as empty
from tiledsl.language import empty_like as empty_like
from tiledsl.language import erf as erf
from tiledsl.language import exp as exp
from tiledsl.language import exp2 as exp2
from tiledsl.language import full as full
from tiledsl.language import grid as grid
from tiledsl.language import log as log
from tiledsl.language import max as max  # noqa: A004
from tiledsl.language import maximum as maximum
from tiledsl.language import mean as mean
from tiledsl.language import min as min  # noqa: A004
from tiledsl.language import minimum as minimum
from tiledsl.language import rsqrt as rsqrt
from tiledsl.language import sigmoid as sigmoid
from tiledsl.language import sqrt as sqrt
from tiledsl.language import sum as sum  # noqa: A004
from tiledsl.language import tanh as tanh
from tiledsl.language import tile as tile
from tiledsl.language import where as where
from tiledsl.language import zeros as zeros
from tiledsl.bits import bitcast as bitcast
from tiledsl.mathlib import acos as acos
from tiledsl.mathlib import asin as asin
from tiledsl.mathlib import atan as atan
from tiledsl.mathlib import atan2 as atan2
from tiledsl.mathlib import ceil as ceil
from tiledsl.mathlib import clamp as clamp
from tiledsl.mathlib import cos as cos
from tiledsl.mathlib import cosh as cosh
from tiledsl.mathlib import expm1 as expm1
from tiledsl.mathlib import floor as floor
from tiledsl.mathlib import fma as fma
from tiledsl.mathlib import isinf as isinf
from tiledsl.mathlib import isnan as isnan
from tiledsl.mathlib import log1p as log1p
from tiledsl.mathlib import log2 as log2
from tiledsl.mathlib import pow as pow  # noqa: A004
from tiledsl.mathlib import round as round  # noqa: A004
from tiledsl.mathlib import sign as sign
from tiledsl.mathlib import sin as sin
from tiledsl.mathlib import sinh as sinh
from tiledsl.mathlib import tan as tan
from tiledsl.mathlib import trunc as trunc
from tiledsl.random import rand as rand
from tiledsl.random import rand4x as rand4x
from tiledsl.random import randint as randint
from tiledsl.random import randint4x as randint4x
from tiledsl.random import randn as randn
from tiledsl.random import randn4x as randn4x
from tiledsl.static_args import constexpr as constexpr
from tiledsl.torch_op import torch_op as torch_op
from tiledsl.tunables import Choice as Choice
from tiledsl.tunables import PowerOfTwo as PowerOfTwo
from tiledsl.tunables import cdiv as cdiv
from tiledsl.tunables import next_power_of_2 as next_power_of_2
from tiledsl.tunables import register_tunable as register_tunable
from tiledsl.block_sizes import register_block_size as register_block_size
from tiledsl.views import join as join
from tiledsl.views import permute as permute
from tiledsl.views import reshape as reshape
from tiledsl.views import split as split
from tiledsl.views import stack as stack
from tiledsl.values import Tensor as Tensor
from tiledsl.values import Tile as Tile
from tiledsl.values import TileValue as TileValue

from tiledsl.version import __version__  # noqa: E402,F401
