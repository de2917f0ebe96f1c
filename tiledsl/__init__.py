"""tiledsl: write a kernel once over tiles; run it on NumPy, lower it to GPUs and spatial arrays.

    import tiledsl as td

    @td.tile_kernel
    def add(x, y):
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            out[t] = x[t] + y[t]
        return out
"""

from tiledsl import testing as testing
from tiledsl.aot import LoadedKernel as LoadedKernel
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
from tiledsl.static_args import constexpr as constexpr
from tiledsl.torch_op import torch_op as torch_op
from tiledsl.views import join as join
from tiledsl.views import permute as permute
from tiledsl.views import reshape as reshape
from tiledsl.views import split as split
from tiledsl.views import stack as stack
from tiledsl.values import Tensor as Tensor
from tiledsl.values import Tile as Tile
from tiledsl.values import TileValue as TileValue

__version__ = "0.1.0"
