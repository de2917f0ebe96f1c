"""Shape functions (tiledsl/frontend/symdims.py): a kernel's output shapes as expressions over its
argument sizes, checked against traces at other sizes (no torch needed)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import tiledsl as td
import shape_kernels
from shape_kernels import first_rows, pair_sums, through_int
from support import SHAPE_FUNCTION_EXAMPLES, example
from tiledsl.frontend.symdims import SymDim, evaluate, recording


def _spec(kernel, args):  # type: ignore[no-untyped-def]
    return kernel.arg_spec(kernel.bind(args, {}))


def _sizes(spec):  # type: ignore[no-untyped-def]
    return lambda i, d: spec[i][1][d]


@pytest.mark.parametrize("name", SHAPE_FUNCTION_EXAMPLES)
def test_the_shape_function_predicts_traces_at_other_sizes(name: str) -> None:
    mod = example(name)
    kernel = getattr(mod, name)
    first = _spec(kernel, mod.make_inputs(np.random.default_rng(0)))
    shapes = kernel.traces.shape_function(first)
    assert shapes.followed and shapes.holds(_sizes(first))
    for offset in (3, 17):
        dims = {k: v + offset for k, v in mod.DIMS.items()}
        spec = _spec(kernel, mod.make_inputs(np.random.default_rng(offset), dims))
        traced = [v.type.shape for v in kernel.traces.get(spec).ir.outputs]
        assert shapes.holds(_sizes(spec))
        assert shapes.shapes(_sizes(spec)) == traced


def test_comparisons_are_guards_with_their_outcome() -> None:
    small = _spec(first_rows, (np.ones((40, 9), np.float32),))
    shapes = first_rows.traces.shape_function(small)
    assert (">", ("dim", 0, 0), ("int", 64), False) in shapes.guards
    assert shapes.outputs == ((("dim", 0, 0), ("dim", 0, 1)),)
    big = _spec(first_rows, (np.ones((100, 9), np.float32),))
    assert not shapes.holds(_sizes(big))  # min() took the other side: a new shape function
    assert first_rows.traces.shape_function(big).outputs == ((("int", 64), ("dim", 0, 1)),)
    assert first_rows.traces.shape_function(big).followed  # a literal size is a constant


def test_arithmetic_on_sizes_is_followed() -> None:
    shapes = pair_sums.traces.shape_function(_spec(pair_sums, (np.ones((31, 7), np.float32),)))
    assert shapes.followed
    assert shapes.shapes(lambda i, d: (101, 13)[d]) == [(50, 13)]
    out = pair_sums(x := np.random.default_rng(1).standard_normal((31, 7)).astype(np.float32))
    np.testing.assert_allclose(out, x[0:30:2] + x[1:30:2], rtol=1e-6)


def test_a_size_through_int_is_not_followed_and_names_the_line() -> None:
    shapes = through_int.traces.shape_function(_spec(through_int, (np.ones((33, 5), np.float32),)))
    assert not shapes.followed
    line = next(i for i, text in enumerate(open(shape_kernels.__file__).read().splitlines(), 1)
                if "rows = int(m)" in text)
    assert shapes.lost is not None and shapes.lost.line == line


def test_symdim_behaves_as_its_int() -> None:
    m = SymDim(10, ("dim", 0, 0))
    with recording() as rec:
        assert m + 1 == 11 and 3 * m == 30 and m // 3 == 3 and -m == -10 and m % 4 == 2
        assert (m + 1).expr == ("+", ("dim", 0, 0), ("int", 1))
        assert (20 - m).expr == ("-", ("int", 20), ("dim", 0, 0))
        assert max(m, 4) is m and hash(m) == hash(10)
        assert m / 4 == 2.5 and m * 0.5 == 5.0 and float(m) == 10.0
    assert rec.guards  # the comparisons above
    assert len(rec.conversions) == 3  # /, * by a float, float()
    assert evaluate(((m + 1) * 2).expr, lambda i, d: 7) == 16
    copy = pickle.loads(pickle.dumps(m))
    assert copy == 10 and type(copy) is int


def test_ordinary_traces_hold_plain_ints() -> None:
    """SymDims exist only in shape-function traces: the IR (and every cache key made from it)
    of an ordinary trace holds exact ints."""
    mod = example("matmul")
    spec = _spec(mod.matmul, mod.make_inputs(np.random.default_rng(0)))
    mod.matmul.traces.shape_function(spec)
    fn = mod.matmul.traces.get(spec).ir
    assert all(type(n) is int for v in fn.args + fn.outputs for n in v.type.shape)
    assert all(type(s.extent) is int for s in fn.symbols.values())
