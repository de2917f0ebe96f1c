"""tiledsl: write a kernel once over tiles; run it on NumPy, lower it to GPUs and spatial arrays.

    import tiledsl as td

    @td.tile_kernel
    def add(x, y):
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            out[t] = x[t] + y[t]
        return out
"""

from tiledsl.lang import host_stores as _host_stores  # noqa: F401 (host `x[...] = v`)
from tiledsl.lang import host_reductions as _host_reductions  # noqa: F401 (host `x.sum(0)`)
from tiledsl.lang import host_math as _host_math  # noqa: F401 (host `x + y`, `x.exp()`)
from tiledsl.lang import host_asserts as _host_asserts  # noqa: F401 (host `assert` on data)
from tiledsl.lang import host_matmul as _host_matmul  # noqa: F401 (host `a @ b`, torch.mm)
from tiledsl.lang import host_methods as _host_methods  # noqa: F401 (host `x.ne(v)`, diff)
from tiledsl.lang import host_rows as _host_rows  # noqa: F401 (host `torch.sort(x)`, `x.cumsum(d)`)
from tiledsl.lang import devices as _devices  # noqa: F401 (host `x.device`, device queries)
from tiledsl.lang import host_random as _host_random  # noqa: F401 (random.randint, torch.rand)
from tiledsl.lang import type_promotion as _type_promotion  # noqa: F401 (elementwise_dtypes)
from tiledsl.frontend import tensor_subclasses as _subclasses  # noqa: F401 (torchao's wrappers)
from tiledsl.lang.host_tensors import tensor as tensor  # host `torch.tensor([...])`
from tiledsl.lang.host_tensors import empty_strided as empty_strided  # host torch's
from tiledsl.lang import philox as philox
from tiledsl import testing as testing
from tiledsl.interop.aot import LoadedKernel as LoadedKernel
from tiledsl.lang.atomics import atomic_add as atomic_add
from tiledsl.lang.atomics import atomic_and as atomic_and
from tiledsl.lang.atomics import atomic_or as atomic_or
from tiledsl.lang.atomics import atomic_xor as atomic_xor
from tiledsl.lang.atomics import atomic_cas as atomic_cas
from tiledsl.lang.atomics import atomic_max as atomic_max
from tiledsl.lang.atomics import atomic_min as atomic_min
from tiledsl.lang.atomics import atomic_xchg as atomic_xchg
from tiledsl.lang.access import load as load  # in a kernel a masked load; outside, aot.load
from tiledsl.lang.access import store as store
from tiledsl.lang.block_ptrs import advance as advance
from tiledsl.lang.block_ptrs import make_block_ptr as make_block_ptr
from tiledsl.lang.tensor_descriptors import load_tensor_descriptor as load_tensor_descriptor
from tiledsl.lang.tensor_descriptors import make_tensor_descriptor as make_tensor_descriptor
from tiledsl.lang.tensor_descriptors import store_tensor_descriptor as store_tensor_descriptor
from tiledsl.lang.tensor_descriptors import tensor_descriptor as tensor_descriptor
from tiledsl.runtime.config import Config as Config
from tiledsl.runtime.config import ConfigSpace as ConfigSpace
from tiledsl.dtypes import DType as DType
from tiledsl.dtypes import bfloat16 as bfloat16
from tiledsl.dtypes import bool_ as bool_
from tiledsl.dtypes import float16 as float16
from tiledsl.dtypes import float32 as float32
from tiledsl.dtypes import float64 as float64
from tiledsl.dtypes import float8_e4m3fn as float8_e4m3fn
from tiledsl.dtypes import float8_e5m2 as float8_e5m2
from tiledsl.dtypes import float8_e8m0fnu as float8_e8m0fnu
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
from tiledsl.errors import DeviceAssertionError as DeviceAssertionError
from tiledsl.errors import RaceError as RaceError
from tiledsl.errors import ShapeError as ShapeError
from tiledsl.errors import TileDSLError as TileDSLError
from tiledsl.errors import TileDSLWarning as TileDSLWarning
from tiledsl.errors import TraceError as TraceError
from tiledsl.runtime.kernel import TileKernel as TileKernel
from tiledsl.lang.scans import argsort as argsort
from tiledsl.lang.scans import associative_scan as associative_scan
from tiledsl.lang.scans import reduce as reduce
from tiledsl.lang.asserts import device_assert as device_assert
from tiledsl.lang.scans import sort as sort
from tiledsl.lang.scans import topk as topk
from tiledsl.runtime.kernel import tile_kernel as tile_kernel
from tiledsl.runtime.launch_mode import triton_launches as triton_launches
from tiledsl.lang.language import abs as abs  # noqa: A004
from tiledsl.lang.language import argmax as argmax
from tiledsl.lang.language import argmin as argmin
from tiledsl.lang.language import cumsum as cumsum
from tiledsl.lang.language import astype as astype
from tiledsl.lang.language import dot as dot
from tiledsl.lang.language import empty as empty
from tiledsl.lang.language import erf as erf
from tiledsl.lang.language import exp as exp
from tiledsl.lang.language import exp2 as exp2
from tiledsl.lang.language import full as full
from tiledsl.lang.language import grid as grid
from tiledsl.lang.language import log as log
from tiledsl.lang.language import max as max  # noqa: A004
from tiledsl.lang.language import maximum as maximum
from tiledsl.lang.language import mean as mean
from tiledsl.lang.language import min as min  # noqa: A004
from tiledsl.lang.language import minimum as minimum
from tiledsl.lang.language import rsqrt as rsqrt
from tiledsl.lang.language import sigmoid as sigmoid
from tiledsl.lang.language import sqrt as sqrt
from tiledsl.lang.language import sum as sum  # noqa: A004
from tiledsl.lang.language import tanh as tanh
from tiledsl.lang.language import tile as tile
from tiledsl.lang.language import where as where
from tiledsl.lang.language import zeros as zeros
from tiledsl.lang.language import ones as ones
from tiledsl.lang.bits import bitcast as bitcast
from tiledsl.lang.helion_names import barrier as barrier
from tiledsl.lang.helion_names import cumprod as cumprod
from tiledsl.lang.helion_names import specialize as specialize
from tiledsl.lang.helion_names import static_range as static_range
from tiledsl.lang.helion_names import subscript as subscript
from tiledsl.lang.helion_names import tile_begin as tile_begin
from tiledsl.lang.helion_names import tile_block_size as tile_block_size
from tiledsl.lang.helion_names import tile_end as tile_end
from tiledsl.lang.helion_names import tile_id as tile_id
from tiledsl.lang.helion_names import tile_index as tile_index
from tiledsl.lang.like import empty_like as empty_like
from tiledsl.lang.like import full_like as full_like
from tiledsl.lang.like import ones_like as ones_like
from tiledsl.lang.like import zeros_like as zeros_like
from tiledsl.lang.torch_names import addmm as addmm
from tiledsl.lang.torch_names import amax as amax
from tiledsl.lang.torch_names import amin as amin
from tiledsl.lang.torch_names import finfo as finfo
from tiledsl.lang.torch_names import iinfo as iinfo
from tiledsl.lang.torch_names import matmul as matmul
from tiledsl.lang.torch_names import promote_types as promote_types
from tiledsl.lang.torch_names import register_reduction_dim as register_reduction_dim
from tiledsl.lang.torch_names import result_type as result_type
from tiledsl.lang.torch_names import relu as relu
from tiledsl.lang.torch_names import silu as silu
from tiledsl.lang.torch_names import std as std
from tiledsl.lang.torch_names import var as var
from tiledsl.lang.torch_names import var_mean as var_mean
from tiledsl.lang.mathlib import acos as acos
from tiledsl.lang.mathlib import acosh as acosh
from tiledsl.lang.mathlib import asin as asin
from tiledsl.lang.mathlib import asinh as asinh
from tiledsl.lang.mathlib import atan as atan
from tiledsl.lang.mathlib import atan2 as atan2
from tiledsl.lang.mathlib import atanh as atanh
from tiledsl.lang.mathlib import cbrt as cbrt
from tiledsl.lang.mathlib import ceil as ceil
from tiledsl.lang.mathlib import clamp as clamp
from tiledsl.lang.mathlib import copysign as copysign
from tiledsl.lang.mathlib import cos as cos
from tiledsl.lang.mathlib import cosh as cosh
from tiledsl.lang.mathlib import expm1 as expm1
from tiledsl.lang.mathlib import floor as floor
from tiledsl.lang.mathlib import fma as fma
from tiledsl.lang.mathlib import fmod as fmod
from tiledsl.lang.mathlib import hypot as hypot
from tiledsl.lang.mathlib import isfinite as isfinite
from tiledsl.lang.mathlib import isinf as isinf
from tiledsl.lang.mathlib import isnan as isnan
from tiledsl.lang.mathlib import log10 as log10
from tiledsl.lang.mathlib import log1p as log1p
from tiledsl.lang.mathlib import log2 as log2
from tiledsl.lang.mathlib import pow as pow  # noqa: A004
from tiledsl.lang.mathlib import round as round  # noqa: A004
from tiledsl.lang.mathlib import sign as sign
from tiledsl.lang.mathlib import sin as sin
from tiledsl.lang.mathlib import sinh as sinh
from tiledsl.lang.mathlib import tan as tan
from tiledsl.lang.mathlib import trunc as trunc
from tiledsl.lang.random import rand as rand
from tiledsl.lang.random import rand4x as rand4x
from tiledsl.lang.random import randint as randint
from tiledsl.lang.random import randint4x as randint4x
from tiledsl.lang.random import randn as randn
from tiledsl.lang.random import randn4x as randn4x
from tiledsl.lang.random import uint_to_uniform_float as uint_to_uniform_float
from tiledsl.lang.random import pair_uniform_to_normal as pair_uniform_to_normal
from tiledsl.frontend.static_args import constexpr as constexpr
from tiledsl.interop.torch_op import torch_op as torch_op
from tiledsl.frontend.tunables import Choice as Choice
from tiledsl.frontend.tunables import PowerOfTwo as PowerOfTwo
PowerOfTwoFragment = PowerOfTwo  # helion.autotuner's name
int1 = bool_  # Triton's tl.int1
float8e4nv, float8e5 = float8_e4m3fn, float8_e5m2  # Triton's names of the fp8 dtypes
from tiledsl.frontend.tunables import cdiv as cdiv
from tiledsl.frontend.tunables import next_power_of_2 as next_power_of_2
from tiledsl.frontend.tunables import register_tunable as register_tunable
from tiledsl.frontend.block_sizes import register_block_size as register_block_size
from tiledsl.lang.arange import arange as arange
from tiledsl.lang.ranges import range as range  # noqa: A004
from tiledsl.lang.jagged import jagged_tile as jagged_tile
from tiledsl.lang.views import gather as gather
from tiledsl.lang.views import atleast_1d as atleast_1d
from tiledsl.lang.views import atleast_2d as atleast_2d
from tiledsl.lang.views import atleast_3d as atleast_3d
from tiledsl.lang.views import broadcast as broadcast
from tiledsl.lang.views import broadcast_to as broadcast_to
from tiledsl.lang.views import join as join
from tiledsl.lang.views import permute as permute
from tiledsl.lang.views import reshape as reshape
from tiledsl.lang.views import split as split
from tiledsl.lang.views import stack as stack
from tiledsl.lang.torch_calls import baddbmm as baddbmm
from tiledsl.lang.torch_calls import bmm as bmm
from tiledsl.lang.torch_calls import gelu as gelu
from tiledsl.lang.torch_calls import leaky_relu as leaky_relu
from tiledsl.lang.torch_calls import log_softmax as log_softmax
from tiledsl.lang.torch_calls import softmax as softmax
from tiledsl.lang.torch_calls import softplus as softplus
from tiledsl.lang.triton_names import cast as cast
from tiledsl.lang.triton_names import debug_barrier as debug_barrier
from tiledsl.lang.triton_names import expand_dims as expand_dims
from tiledsl.lang.triton_names import max_constancy as max_constancy
from tiledsl.lang.triton_names import max_contiguous as max_contiguous
from tiledsl.lang.triton_names import fdiv as fdiv
div_rn = fdiv  # Triton's tl.div_rn
rint = round  # libdevice's rint: half to even
from tiledsl.lang.rounded_division import div_rz as div_rz  # libdevice's
from tiledsl.lang.inline_asm import inline_asm_elementwise as inline_asm_elementwise
from tiledsl.lang.triton_names import multiple_of as multiple_of
from tiledsl.lang.triton_names import ravel as ravel
from tiledsl.lang.triton_names import num_programs as num_programs
from tiledsl.lang.triton_names import program_id as program_id
from tiledsl.lang.triton_names import PropagateNan as PropagateNan
from tiledsl.frontend import launches as _launches  # noqa: F401 (host `kernel[grid](...)`)
from tiledsl.lang.triton_names import static_assert as static_assert
from tiledsl.lang.triton_names import trans as trans
from tiledsl.lang.triton_library import assume as assume
from tiledsl.lang.triton_library import cat as cat
from tiledsl.lang.triton_library import constexpr_function as constexpr_function
from tiledsl.lang.triton_library import flip as flip
from tiledsl.lang.triton_library import histogram as histogram
from tiledsl.lang.triton_library import interleave as interleave
from tiledsl.lang.triton_library import sqrt_rn as sqrt_rn
from tiledsl.lang.triton_library import static_print as static_print
from tiledsl.lang.triton_library import swizzle2d as swizzle2d
from tiledsl.lang.triton_library import umulhi as umulhi
from tiledsl.lang.triton_library import view as view
from tiledsl.lang.triton_library import xor_sum as xor_sum
from tiledsl.frontend.values import Tensor as Tensor
from tiledsl.frontend.values import Tile as Tile
from tiledsl.frontend.values import TileValue as TileValue

from tiledsl.version import __version__  # noqa: E402,F401


from tiledsl.frontend import td_names as _td_names  # noqa: E402

_td_names.FUNCTIONS.update({n: v for n, v in list(globals().items())
                            if callable(v) and not n.startswith("_") and not isinstance(v, type)})

from tiledsl.lang.triton_names import math as math  # noqa: E402  (tl.math's names)


def __getattr__(name: str) -> object:
    """Triton's names with no tiledsl counterpart: an AttributeError that says what to write."""
    from tiledsl.lang.triton_names import MISSING
    if name in MISSING:
        raise AttributeError(f"tiledsl has no td.{name} (Triton's tl.{name}): {MISSING[name]}")
    import difflib
    close = difflib.get_close_matches(name, [n for n in globals() if not n.startswith("_")], 3)
    raise AttributeError(f"module 'tiledsl' has no attribute {name!r}"
                         + (f"; did you mean {', '.join('td.' + c for c in close)}?" if close
                            else " (the README's language section lists what it has)"))
