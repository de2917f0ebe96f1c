"""td.torch_op: tile kernels as PyTorch custom ops, eager, under torch.compile(fullgraph=True),
and checked by torch.library.opcheck (CPU tensors; CUDA launches are in test_triton_gpu)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import tiledsl as td
from support import (ARRAY_ARG_EXAMPLES, SHAPE_FUNCTION_EXAMPLES, example, fresh, plus_k,
                     scaled_rows, sized_rows, torch_from_numpy)
from tiledsl.testing import assert_close

torch = pytest.importorskip("torch")
_ids = itertools.count()


def op_for(name: str, **options):  # type: ignore[no-untyped-def]
    """A fresh op name per registration (torch keeps ops for the process)."""
    return td.torch_op(getattr(example(name), name), name=f"tdtest::{name}_{next(_ids)}",
                       **options)


def torch_args(args: tuple) -> tuple:
    return tuple(torch_from_numpy(a) for a in args)


@pytest.mark.parametrize("name", ARRAY_ARG_EXAMPLES)
def test_examples_eager_compiled_and_opcheck(name: str) -> None:
    mod = example(name)
    args = mod.make_inputs(np.random.default_rng(11))
    ref = mod.reference(*fresh(args))
    op = op_for(name)
    targs = torch_args(fresh(args))
    eager = op(*targs)
    torch._dynamo.reset()  # one compiled lambda per test, not recompiles of one
    compiled = torch.compile(lambda *a: op(*a), fullgraph=True, dynamic=False)(*targs)
    for outs in (eager, compiled):  # one tensor, or a tuple (rope's q and k)
        for out, r in zip(td.testing.as_tuple(outs), td.testing.as_tuple(ref)):
            expected = torch.float32 if r.dtype.kind == "f" else torch.int32
            assert isinstance(out, torch.Tensor) and out.dtype == expected
            assert_close(out.numpy(), r, np.float32)
    fp8 = any(isinstance(t, torch.Tensor) and t.dtype.itemsize == 1 and t.is_floating_point()
              for t in targs)  # torch's schema check multiplies inputs: no fp8 mul on the CPU
    utils = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    torch.library.opcheck(op, targs, test_utils=utils if fp8 else ("test_schema", *utils))


def test_schema_reads_scalar_annotations_and_return_arity() -> None:
    assert str(op_for("axpby")._opoverload._schema).endswith(
        "(Tensor x, Tensor y, float alpha, float beta) -> Tensor")
    assert str(op_for("matmul")._opoverload._schema).endswith("(Tensor a, Tensor b) -> Tensor")


def test_fake_tensors_get_the_traced_shapes_and_dtypes() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    op = op_for("matmul")
    with FakeTensorMode():
        a = torch.empty(301, 77, dtype=torch.bfloat16)
        b = torch.empty(77, 45, dtype=torch.bfloat16)
        out = op(a, b)
    assert out.shape == (301, 45) and out.dtype == torch.bfloat16


@td.tile_kernel
def doubled_like(x):
    out = td.empty_like(x)  # laid out as x (torch's preserve_format)
    for tm, tn in td.tile(*x.shape):
        out[tm, tn] = x[tm, tn] * 2
    return out


def test_an_output_laid_out_as_its_input_has_fake_strides_to_match() -> None:
    op = td.torch_op(doubled_like, name=f"tdtest::doubled_like_{next(_ids)}")
    x = torch.randn(37, 5).T
    out = op(x)
    assert out.stride() == x.stride() == torch.empty_like(x).stride()
    torch.testing.assert_close(out, 2 * x, rtol=0, atol=0)
    torch._dynamo.reset()
    compiled = torch.compile(lambda x: op(x).T.reshape(-1) + 1, fullgraph=True)(x)
    torch.testing.assert_close(compiled, 2 * x.T.reshape(-1) + 1, rtol=0, atol=0)
    torch.library.opcheck(op, (x,))


def test_compiled_graph_has_no_breaks_around_the_op() -> None:
    op = op_for("softmax")
    x = torch.randn(70, 130)
    explain = torch._dynamo.explain(lambda t: op(t * 2) - 1)(x)
    assert explain.graph_break_count == 0 and explain.graph_count == 1


@td.tile_kernel
def scale_(x, s: float):
    for t in td.tile(x.shape[0]):
        x[t] = x[t] * s


@td.tile_kernel
def scaled_copy(x, s: float):
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] * s
    return out


@td.tile_kernel
def rms_scaled(x, w, eps):  # unannotated, as users write it: eps is a number, x and w tensors
    out = td.empty_like(x)
    for tm in td.tile(x.shape[0]):
        row = x[tm, :]
        out[tm, :] = row * td.rsqrt(td.mean(row * row, axis=1, keepdims=True) + eps) * w[:]
    return out


@td.tile_kernel
def through_helper(x, s):
    return _scaled_by(x, s)


def _scaled_by(x, s):  # type: ignore[no-untyped-def]
    out = td.empty_like(x)
    for t in td.tile(x.shape[0]):
        out[t] = x[t] * s
    return out


def test_unannotated_scalars_are_read_from_the_body_or_asked_for() -> None:
    op = td.torch_op(rms_scaled, name="tdtest::rms_scaled")
    assert str(op._opoverload._schema).endswith("(Tensor x, Tensor w, Scalar eps) -> Tensor")
    x, w = torch.randn(13, 37, dtype=torch.float64), torch.randn(37, dtype=torch.float64)
    torch._dynamo.reset()
    f = torch.compile(lambda a, b, e: op(a, b, e) + 1, fullgraph=True, backend="aot_eager")
    for eps, run in ((1e-6, f), (2, lambda *a: op(*a) + 1)):  # an int reaches it as an int
        ref = x * torch.rsqrt((x * x).mean(1, keepdim=True) + eps) * w + 1
        torch.testing.assert_close(run(x, w, eps), ref)
    with pytest.raises(td.ArgumentError, match=r"test_torch_op.py:\d+: in kernel "
                       r"'through_helper': td.torch_op cannot tell whether parameter 'x' is a "
                       r"tensor(.|\n)*hint: annotate it: `x: float` \(or int, bool\) for a "
                       r"number, `x: td.Tensor` for a tensor"):
        td.torch_op(through_helper, name="tdtest::through_helper")


def test_in_place_kernels_declare_what_they_mutate() -> None:
    op = td.torch_op(scale_, name="tdtest::scale_", mutates_args=("x",))
    x = torch.randn(257)
    before = x.clone()
    assert op(x, 3.0) is None
    torch.testing.assert_close(x, before * 3.0)

    def f(t: torch.Tensor) -> torch.Tensor:
        t = t + 1
        op(t, 2.0)
        return t
    y = torch.randn(100)
    torch.testing.assert_close(torch.compile(f, fullgraph=True)(y), (y + 1) * 2.0)
    torch.library.opcheck(op, (torch.randn(33), 0.5))


def test_an_undeclared_write_is_a_clear_error() -> None:
    op = td.torch_op(scale_, name="tdtest::scale_undeclared")
    with pytest.raises(td.ArgumentError, match=r"writes \['x'\] in place; declare them with "
                       r"td.torch_op\(..., mutates_args=\('x',\)\)"):
        op(torch.randn(10), 2.0)


def test_decorator_form() -> None:
    @td.torch_op(name="tdtest::decorated")
    @td.tile_kernel
    def double(x):
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            out[t] = x[t] * 2
        return out

    x = torch.randn(99, dtype=torch.float64)
    torch.testing.assert_close(double(x), x * 2)


def test_bad_registrations_are_clear_errors() -> None:
    with pytest.raises(td.ArgumentError, match="must be 'namespace::name'"):
        td.torch_op(scaled_copy, name="no_namespace")
    with pytest.raises(td.ArgumentError, match=r"mutates_args names \['y'\]"):
        td.torch_op(scaled_copy, name="tdtest::bad", mutates_args=("y",))
    with pytest.raises(td.ArgumentError, match="takes a @td.tile_kernel"):
        td.torch_op(lambda x: x, name="tdtest::lam")  # type: ignore[arg-type]


def test_a_none_in_the_returned_tuple_is_not_part_of_the_ops_return() -> None:
    """A schema holds no optional output: a literal None is left out of the op's return, and
    a call whose optional output is None where the schema has a tensor is a clear error."""
    @td.tile_kernel
    def doubled_and_none(x):
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            out[t] = x[t] * 2
        return out, None

    op = td.torch_op(doubled_and_none, name=f"tdtest::doubled_and_none_{next(_ids)}")
    assert str(op._opoverload._schema).endswith("(Tensor x) -> Tensor")
    x = torch.randn(45, dtype=torch.float64)
    torch.testing.assert_close(op(x), x * 2)
    op = td.torch_op(scaled_rows, name=f"tdtest::scaled_rows_{next(_ids)}")
    o, sums = op(torch.randn(9, 8).double(), 2.0, True)
    assert o.shape == (9, 8) and sums.shape == (9,)
    with pytest.raises(td.ArgumentError, match=r"returned 1 tensors, the op \S+ was registered "
                                               "with 2") as err:
        op(torch.randn(9, 8), 2.0, False)
    assert "no optional outputs" in err.value.hint


def test_numbers_in_the_returned_tuple_are_not_part_of_the_ops_return() -> None:
    op = td.torch_op(sized_rows, name=f"tdtest::sized_rows_{next(_ids)}", outputs=1)
    x = torch.randn(5, 20, dtype=torch.float64)
    torch.testing.assert_close(op(x), x + 1)
    op = td.torch_op(sized_rows, name=f"tdtest::sized_rows_{next(_ids)}")
    with pytest.raises(td.ArgumentError, match="returned 1 tensors") as err:
        op(x)  # its return names 4 values, 3 of them numbers: outputs= says so
    assert "pass outputs= when the tuple returns numbers" in err.value.hint


def test_triton_op_path_runs_numpy_on_cpu_and_passes_opcheck() -> None:
    op = op_for("matmul", triton=True)
    a, b = torch.randn(70, 50), torch.randn(50, 40)
    torch.testing.assert_close(op(a, b), a @ b, rtol=1e-4, atol=1e-4)
    # Under torch.compile, CPU tensors take the NumPy path as an opaque op (tracing the Triton
    # launches needs a GPU driver): compiled calls and every opcheck test pass on the CPU.
    torch._dynamo.reset()
    compiled = torch.compile(lambda x, y: op(x, y) + 1, fullgraph=True)(a, b)
    torch.testing.assert_close(compiled, a @ b + 1, rtol=1e-4, atol=1e-4)
    torch.library.opcheck(op, (a, b))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
@pytest.mark.parametrize("triton", [False, True], ids=["custom_op", "triton_op"])
def test_ops_on_cuda_eager_compiled_and_opcheck(triton: bool) -> None:
    op = op_for("matmul", triton=triton)
    a = torch.randn(300, 200, device="cuda", dtype=torch.float16)
    b = torch.randn(200, 100, device="cuda", dtype=torch.float16)
    ref = (a.float() @ b.float()).half()
    torch.testing.assert_close(op(a, b), ref, rtol=2e-2, atol=2e-2)
    torch._dynamo.reset()
    compiled = torch.compile(lambda x, y: op(x, y) + 1, fullgraph=True)(a, b)
    torch.testing.assert_close(compiled, ref + 1, rtol=2e-2, atol=2e-2)
    torch.library.opcheck(op, (a, b))


def test_triton_op_path_lets_the_compiler_see_the_triton_kernels() -> None:
    """AOTAutograd (what torch.compile runs) decomposes the op into the generated @triton.jit
    kernel launched through wrap_triton: traced here on fake CUDA tensors, no GPU needed."""
    from functorch.compile import aot_function
    from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table
    from torch._subclasses.fake_tensor import FakeTensorMode

    op = op_for("matmul", triton=True)
    graphs = []

    class Captured(Exception):
        pass

    def capture(gm, _inputs):  # type: ignore[no-untyped-def]
        graphs.append(gm)
        raise Captured  # stop before anything runs on the (absent) GPU

    with FakeTensorMode():
        a = torch.empty(70, 50, device="cuda", dtype=torch.float16)
        b = torch.empty(50, 40, device="cuda", dtype=torch.float16)
        with pytest.raises(Captured):
            aot_function(lambda x, y: op(x, y) * 2, fw_compiler=capture)(a, b)
    calls = [n for n in graphs[0].graph.nodes
             if n.target is torch.ops.higher_order.triton_kernel_wrapper_functional]
    assert len(calls) == 1
    kernel = kernel_side_table.get_kernel(calls[0].kwargs["kernel_idx"])
    assert kernel.fn.__name__ == "matmul_kernel"
    assert calls[0].kwargs["grid"] == [(2, 1, 1)]  # 70x40 in 64x64 tiles (the default config)


def test_an_int_scalar_that_torch_compile_makes_symbolic() -> None:
    """A second int value makes dynamo pass a SymInt (automatic dynamic): the fake kernel
    traces it as the int64 it is."""
    op = td.torch_op(plus_k, name="tiledsl_test::plus_k")
    f = torch.compile(lambda x, k: op(x, k), fullgraph=True)
    x = torch.arange(5, dtype=torch.float32)
    for k in (1, 2, 3):
        torch.testing.assert_close(f(x, k), x + k)


def _graphs() -> int:
    from torch._dynamo.utils import counters
    return counters["stats"]["unique_graphs"]


@pytest.fixture
def no_compile_cache():  # type: ignore[no-untyped-def]
    """Compile afresh: a graph from torch's on-disk caches brings the guards of an earlier
    run, which would hide a missing guard."""
    import torch._inductor.config as inductor
    with inductor.patch(force_disable_caches=True):
        yield


@pytest.mark.parametrize("name", SHAPE_FUNCTION_EXAMPLES)
def test_dynamic_shapes_compile_one_graph_for_every_size(name: str, no_compile_cache: None) -> None:
    """Under torch.compile(dynamic=True) the fake kernel returns symbolic output sizes (the
    kernel's shape function), so three ragged shapes share one graph."""
    mod = example(name)
    op = op_for(name)
    torch._dynamo.reset()
    before = _graphs()
    f = torch.compile(lambda *a: op(*a), fullgraph=True, dynamic=True)
    for offset in (0, 5, 11):
        dims = {k: v + offset for k, v in mod.DIMS.items()}
        args = mod.make_inputs(np.random.default_rng(offset), dims)
        ref = mod.reference(*fresh(args))
        outs = f(*torch_args(fresh(args)))
        for out, r in zip(td.testing.as_tuple(outs), td.testing.as_tuple(ref)):
            assert_close(out.numpy(), r, np.float32)
    assert _graphs() - before == 1


from shape_kernels import first_rows, pair_sums, through_int  # noqa: E402


def test_a_size_comparison_recompiles_when_it_flips(no_compile_cache: None) -> None:
    op = td.torch_op(first_rows, name="tdtest::first_rows")
    torch._dynamo.reset()
    before = _graphs()
    f = torch.compile(lambda x: op(x) - 1, fullgraph=True, dynamic=True)
    for m in (40, 50, 100, 130):  # min(m, 64) switches sides once
        x = torch.randn(m, 9)
        torch.testing.assert_close(f(x), x[:64] * 2 - 1)
    assert _graphs() - before == 2


def test_mark_dynamic_with_size_arithmetic(no_compile_cache: None) -> None:
    op = td.torch_op(pair_sums, name="tdtest::pair_sums")
    torch._dynamo.reset()
    f = torch.compile(lambda x: op(x), fullgraph=True)
    for m in (31, 44):
        x = torch.randn(m, 7)
        torch._dynamo.mark_dynamic(x, 0)
        half = m // 2 * 2
        torch.testing.assert_close(f(x), x[0:half:2] + x[1:half:2])


def test_a_size_tiledsl_cannot_follow_specializes_with_a_warning(no_compile_cache: None) -> None:
    op = td.torch_op(through_int, name="tdtest::through_int")
    torch._dynamo.reset()
    before = _graphs()
    f = torch.compile(lambda x: op(x) + 1, fullgraph=True, dynamic=True)
    with pytest.warns(UserWarning, match=r"shape_kernels.py:\d+: kernel 'through_int' computes "
                      r"an output size through int\(\)"):
        for m in (33, 40):
            x = torch.randn(m, 5)
            torch.testing.assert_close(f(x), x + 1)
    assert _graphs() - before == 2  # one graph per size, each right


def test_a_data_dependent_size_is_a_clear_error(no_compile_cache: None) -> None:
    op = op_for("vector_add")
    torch._dynamo.reset()
    f = torch.compile(lambda x: op(x[x > 0], x[x > 0]), fullgraph=True)
    import torch._dynamo.config as dynamo
    with dynamo.patch(capture_dynamic_output_shape_ops=True), \
            pytest.raises(Exception, match=r"in kernel 'vector_add': argument 'x' has a "
                          r"data-dependent shape \(u\d+,\)"):
        f(torch.randn(100))


def test_registering_a_taken_name_is_a_clear_error() -> None:
    # torch would replace the first op: calling it would silently run the second kernel
    first = td.torch_op(example("softmax").softmax, name="tdtest::taken")
    with pytest.raises(td.ArgumentError, match="a custom op named tdtest::taken is already "
                       "registered; pick another name"):
        td.torch_op(example("row_sum").row_sum, name="tdtest::taken")
    assert first(torch.randn(7, 9)).shape == (7, 9)
    again = td.torch_op(example("softmax").softmax, name="tdtest::taken")  # a re-run cell
    assert again(torch.randn(7, 9)).shape == (7, 9)
    td.torch_op(example("row_sum").row_sum, name="tdtest::taken2_cpu")
    with pytest.raises(td.ArgumentError, match="tdtest::taken2_cpu is already registered"):
        td.torch_op(scaled_copy, name="tdtest::taken2", triton=True)  # its CPU op's name


@pytest.mark.parametrize("name", ["tdtest::with space", "tdtest::a-b", "tdtest::a.b", "tdtest::",
                                  "::x", "tdtest::a::b", "tdtest::1a", "tdtest::ünï", 5])
def test_a_malformed_op_name_is_a_clear_error(name: object) -> None:
    with pytest.raises(td.ArgumentError, match="must be 'namespace::name', each part an "
                       "identifier"):
        td.torch_op(scaled_copy, name=name)  # type: ignore[arg-type]


def test_mutates_args_given_as_a_string_is_a_clear_error() -> None:
    with pytest.raises(td.ArgumentError, match=r"mutates_args is the string 'x'; pass a tuple "
                       r"of parameter names, e.g. mutates_args=\('x',\)"):
        td.torch_op(scale_, name="tdtest::scale_str", mutates_args="x")


@pytest.mark.parametrize("triton", [False, True], ids=["custom_op", "triton_op"])
def test_backward_through_an_op_is_a_clear_error(triton: bool) -> None:
    op = op_for("softmax", triton=triton)
    x = torch.randn(5, 6, requires_grad=True)
    out = op(x)  # the forward runs (inference with parameters that require grad)
    assert_close(out.detach().numpy(), example("softmax").reference(x.detach().numpy()),
                 np.float32)
    with pytest.raises(td.ArgumentError, match=r"op tdtest::softmax_\d+ has no backward"):
        out.sum().backward()
    if triton:
        return

    def backward(ctx, grad):  # softmax's: s * (g - sum(g * s))
        (s,) = ctx.saved_tensors
        return s * (grad - (grad * s).sum(-1, keepdim=True))

    def setup_context(ctx, inputs, output):  # (torch passes these by name)
        ctx.save_for_backward(output)

    op.register_autograd(backward, setup_context=setup_context)
    g = torch.randn(5, 6)
    (got,) = torch.autograd.grad(op(x), (x,), g)  # torch's API gives the op a backward
    x64 = x.detach().double().requires_grad_()
    (want,) = torch.autograd.grad(torch.softmax(x64, -1), (x64,), g.double())
    assert_close(got.numpy(), want.numpy(), np.float32)


def test_an_in_place_write_into_a_tensor_that_requires_grad_is_a_clear_error() -> None:
    # torch gives ops that mutate no autograd: the gradient would silently miss the write
    op = td.torch_op(scale_, name="tdtest::scale_grad", mutates_args=("x",))
    leaf = torch.ones(5, requires_grad=True)
    with pytest.raises(td.ArgumentError, match="writes argument 'x' in place, and that tensor "
                       "requires grad"):
        op(leaf * 1, 2.0)
    with pytest.raises(td.ArgumentError, match="requires grad"):
        op(leaf, 2.0)
    assert torch.equal(leaf, torch.ones(5))

    def f(t: torch.Tensor) -> torch.Tensor:
        u = t * 1
        op(u, 2.0)
        return u
    torch._dynamo.reset()
    with pytest.raises(Exception, match="writes argument 'x' in place, and that tensor requires "
                       "grad"):
        torch.compile(f, fullgraph=True)(leaf)
    detached = torch.ones(5)
    op(detached, 2.0)
    assert torch.equal(detached, torch.full((5,), 2.0))
