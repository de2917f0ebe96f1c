"""DLPack interop: kernels called on torch, JAX and other DLPack arrays on the CPU run on the
NumPy backend through zero-copy views and return the caller's kind of array."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import tiledsl as td
from support import ARRAY_ARG_EXAMPLES, example, fresh, torch_from_numpy
from tiledsl.testing import assert_close

torch = pytest.importorskip("torch")

DTYPES = {"f32": (np.float32, torch.float32), "bf16": (ml_dtypes.bfloat16, torch.bfloat16)}


def to_torch(a: Any) -> Any:
    return torch_from_numpy(a)


def torch_to_numpy(t: Any) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


@td.tile_kernel
def scale_(x, s):
    """Scales x in place (returns nothing)."""
    for t in td.tile(x.shape[0]):
        x[t] = x[t] * s


@td.tile_kernel
def scale_and_return(x, s):
    """Scales x in place and returns it."""
    for t in td.tile(x.shape[0]):
        x[t] = x[t] * s
    return x


@pytest.mark.parametrize("dtype", list(DTYPES), ids=list(DTYPES))
@pytest.mark.parametrize("name", ARRAY_ARG_EXAMPLES)
def test_examples_on_torch_cpu_tensors(name: str, dtype: str) -> None:
    mod = example(name)
    args = mod.make_inputs(np.random.default_rng(5), dtype=DTYPES[dtype][0])
    ref = mod.reference(*fresh(args))
    out = getattr(mod, name)(*(to_torch(a) for a in fresh(args)))
    on_numpy = getattr(mod, name)(*fresh(args))  # the dtypes torch outputs must have
    outs = out if isinstance(out, tuple) else (out,)
    refs = ref if isinstance(ref, tuple) else (ref,)
    for o, r, n in zip(outs, refs, td.testing.as_tuple(on_numpy)):
        assert isinstance(o, torch.Tensor) and o.device.type == "cpu"
        assert torch_to_numpy(o).dtype == n.dtype
        assert_close(torch_to_numpy(o), r, DTYPES[dtype][0])


def test_torch_inputs_are_zero_copy_views() -> None:
    x = torch.randn(1000, dtype=torch.float32)
    before = x.clone()
    assert scale_(x, 2.5) is None
    torch.testing.assert_close(x, before * 2.5)


def test_an_output_that_is_an_argument_is_the_callers_object() -> None:
    x = torch.randn(333, dtype=torch.float64)
    before = x.clone()
    out = scale_and_return(x, -1.5)
    assert out is x
    torch.testing.assert_close(x, before * -1.5)


def test_requires_grad_tensors_run_detached() -> None:
    a = torch.randn(37, 29, requires_grad=True)
    b = torch.randn(29, 11, requires_grad=True)
    out = example("matmul").matmul(a, b)
    assert not out.requires_grad
    torch.testing.assert_close(out, (a @ b).detach(), rtol=1e-4, atol=1e-4)


def test_mixed_libraries_are_a_clear_error() -> None:
    a = np.random.default_rng(0).standard_normal((20, 30)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((30, 10)).astype(np.float32)
    with pytest.raises(td.ArgumentError, match=r"different libraries.*'a' is a torch array on "
                       r"cpu, 'b' is a numpy array on cpu") as info:
        example("matmul").matmul(torch.from_numpy(a), b)
    assert info.value.kernel == "matmul"


def test_numbers_mix_with_any_library() -> None:
    x, y, alpha, beta = example("axpby").make_inputs(np.random.default_rng(2))
    out = example("axpby").axpby(torch.from_numpy(x), torch.from_numpy(y), alpha, beta)
    assert_close(out.numpy(), example("axpby").reference(x, y, alpha, beta), np.float32)


class _Foreign:
    """An array of a library tiledsl has never heard of, on an unsupported device."""

    def __init__(self, device_type: int) -> None:
        self.device_type = device_type
        self.shape, self.dtype = (4,), np.dtype(np.float32)

    def __dlpack__(self, **_: Any) -> Any:
        raise AssertionError("never exported")

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self.device_type, 0)


def test_an_unsupported_device_is_a_clear_error() -> None:
    with pytest.raises(td.ArgumentError, match=r"argument 'x' is a test_interop array on "
                       r"rocm:0; tiledsl runs on the CPU \(NumPy backend\) and on NVIDIA GPUs"):
        scale_(_Foreign(10), 2.0)


def test_jax_arrays_round_trip() -> None:
    jnp = pytest.importorskip("jax.numpy")
    mod = example("softmax")
    (x,) = mod.make_inputs(np.random.default_rng(4))
    out = mod.softmax(jnp.asarray(x))
    assert type(out).__module__.startswith("jax")
    assert_close(np.asarray(out), mod.reference(x), np.float32)
    a = np.random.default_rng(0).standard_normal((91, 33)).astype(ml_dtypes.bfloat16)
    b = np.random.default_rng(1).standard_normal((33, 47)).astype(ml_dtypes.bfloat16)
    out = example("matmul").matmul(jnp.asarray(a), jnp.asarray(b))
    assert out.dtype == jnp.bfloat16
    assert_close(np.asarray(out), example("matmul").reference(a, b), ml_dtypes.bfloat16)


def test_writing_into_a_jax_array_is_a_clear_error() -> None:
    jnp = pytest.importorskip("jax.numpy")
    with pytest.raises(td.ArgumentError, match="writes argument 'x' in place, but that array "
                       "is read-only"):
        scale_(jnp.ones(10, dtype=jnp.float32), 2.0)


def test_read_only_numpy_arrays_that_are_written_are_a_clear_error() -> None:
    x = np.ones(10, dtype=np.float32)
    x.flags.writeable = False
    with pytest.raises(td.ArgumentError, match="writes argument 'x' in place"):
        scale_(x, 2.0)
    y = np.ones(10, dtype=np.float32)
    y.flags.writeable = False  # read-only inputs that are only read are fine
    out = example("vector_add").vector_add(y, y)
    np.testing.assert_array_equal(out, 2 * y)


@td.tile_kernel
def widen(x):
    (n,) = x.shape
    out = td.empty((n,), dtype=td.int64)
    for t in td.tile(n):
        out[t] = x[t].astype(td.int64) * 3_000_000_000
    return out


def test_a_jax_output_is_never_narrowed() -> None:
    """Without jax_enable_x64 JAX would turn an int64 output into int32 (wrapped values)."""
    jax = pytest.importorskip("jax")
    x = np.arange(3, dtype=np.int32)
    if jax.config.read("jax_enable_x64"):
        np.testing.assert_array_equal(widen(jax.numpy.asarray(x)), x * 3_000_000_000)
    else:
        with pytest.raises(td.ArgumentError, match="widen.*an output is int64, which JAX holds "
                           "only with jax_enable_x64"):
            widen(jax.numpy.asarray(x))


def test_in_place_writes_into_torch_tensors_and_autograd() -> None:
    """A tensor that requires grad is not written behind autograd's back; a written tensor's
    version counter moves, so a backward that saved it fails as torch's own in-place ops do."""
    w = torch.ones(10, requires_grad=True)
    with pytest.raises(td.ArgumentError, match="writes argument 'x' in place, and that tensor "
                       "requires grad"):
        scale_(w * 1.0, 2.0)
    x = torch.ones(10)
    z = (w * x).sum()  # saves x for the backward
    before = x._version
    scale_(x, 2.0)
    assert x._version > before and torch.equal(x, torch.full((10,), 2.0))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()


def test_writing_into_a_broadcast_view_is_a_clear_error() -> None:
    with pytest.raises(td.ArgumentError, match=r"writes argument 'x' in place, but its elements "
                       r"share memory \(strides \(0,\)"):
        scale_(np.lib.stride_tricks.as_strided(np.ones(1, np.float32), (10,), (0,)), 2.0)
    with pytest.raises(td.ArgumentError, match="share memory"):
        scale_(torch.ones(1).expand(10), 2.0)


def test_a_lazily_negated_torch_tensor_is_a_clear_error() -> None:
    # torch exports a tensor with its negative bit set by DLPack without the sign
    x = torch._neg_view(torch.arange(1.0, 5.0))
    with pytest.raises(td.ArgumentError, match="argument 'x' is a torch tensor with its negative "
                       r"bit set .*\.resolve_neg\(\)"):
        example("vector_add").vector_add(x, torch.zeros(4))
    out = example("vector_add").vector_add(x.resolve_neg(), torch.zeros(4))
    assert torch.equal(out, -torch.arange(1.0, 5.0))


def test_a_meta_tensor_is_a_clear_error() -> None:
    x = torch.empty(10, device="meta")
    with pytest.raises(td.ArgumentError, match="argument 'x' is a torch array on meta"):
        example("vector_add").vector_add(x, x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_a_sparse_torch_tensor_is_a_clear_error(dtype: Any) -> None:
    # bfloat16 goes through an int16 view, which a sparse tensor refuses with its own error
    x = torch.eye(4, dtype=dtype).to_sparse()
    with pytest.raises(td.ArgumentError, match="argument 'x' .* cannot be viewed as a NumPy"):
        example("softmax").softmax(x)
