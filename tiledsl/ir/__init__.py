"""The tile IR: typed SSA values, ops with regions, a verifier and a round-tripping text form."""

from tiledsl.ir.core import Block, Function, Op, Symbol, Value, walk
from tiledsl.ir.types import Dim, RangeType, TensorType, TileType, Type

__all__ = [
    "Block", "Dim", "Function", "Op", "RangeType", "Symbol", "TensorType", "TileType", "Type",
    "Value", "walk",
]
