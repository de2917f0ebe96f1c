"""The GPU launch paths, checked without a GPU: what backend="triton", the triton_op body and
tiledsl.interop.aot hand to torch, CuPy and Triton (streams, devices, scalar types, dtypes), with
stand-ins for the parts that need a GPU: fake CUDA tensors (torch's FakeTensorMode), a fake
CuPy, and recorders in place of the Triton kernels."""

from __future__ import annotations

import sys
import types
import warnings
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Iterator

import ml_dtypes
import numpy as np
import pytest

import tiledsl as td
from support import example, kernel_of, plus_k, scaled_rows, sized_rows

torch = pytest.importorskip("torch")
pytest.importorskip("triton")
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from lowering.backends.triton import gpu  # noqa: E402
from tiledsl.interop import arrays  # noqa: E402
from tiledsl.runtime import registry


@td.tile_kernel
def scale_(x, k: float):
    (n,) = x.shape
    for t in td.tile(n):
        x[t] = x[t] * k


def lowered(kernel: Any, spec: tuple) -> tuple[Any, td.Config]:
    """The lowered IR of `kernel` for `spec`, and the Triton space's default config."""
    return kernel.traces.get(spec).lowered, kernel.space(spec, "triton").default()


class Launches:
    """Stands in for `wrap_triton` (`wrap(kernel)[grid](*args, **options)`): records each launch
    with the arguments and the CUDA device current at the time (see `cuda_device`)."""

    def __init__(self, state: types.SimpleNamespace | None = None) -> None:
        self.calls: list[tuple[tuple, dict, Any]] = []
        self.state = state

    def __call__(self, kernel: Any) -> Any:
        launches = self

        class Launcher:
            def __getitem__(self, grid: Any) -> Any:
                def launch(*args: Any, **options: Any) -> None:
                    device = None if launches.state is None else launches.state.device
                    launches.calls.append((args, options, device))
                return launch
        return Launcher()


@contextmanager
def cuda_device(state: types.SimpleNamespace, device: Any) -> Iterator[None]:
    """torch.cuda.device, recorded in `state.device` (there is no CUDA here)."""
    before, state.device = state.device, torch.device(device)
    try:
        yield
    finally:
        state.device = before


# ---- the triton_op body: TritonBackend.launch_traced --------------------------------------------
def test_a_symbolic_int_reaches_the_triton_kernel_as_an_int() -> None:
    """torch.compile passes an int argument it made dynamic as a SymInt: the launch must pass it
    on as one (Inductor then passes the int), not as float(k), an fp32 kernel argument."""
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    env = ShapeEnv()
    k = env.create_symintnode(env.create_symbol(5, source=ConstantSource("k")), hint=5)
    fn, config = lowered(plus_k, (("tensor", (70,), "i32"), ("scalar", "i64", True)))
    launches = Launches()
    with FakeTensorMode(shape_env=env):
        x = torch.empty(70, device="cuda", dtype=torch.int32)
        (out,) = registry.backend("triton").launch_traced(fn, [x, k], config, wrap=launches)
    ((args, _, _),) = launches.calls
    assert args[0] is x and args[1] is out and args[2] is k
    assert out.device == x.device and out.dtype == torch.int32


def test_an_eager_triton_op_launch_runs_on_the_tensors_device(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Eager calls of a triton_op launch in its body, where Triton takes torch's current device:
    tensors on cuda:1 must not be launched on cuda:0."""
    fn, config = lowered(plus_k, (("tensor", (70,), "f32"), ("scalar", "i64", True)))
    state = types.SimpleNamespace(device=torch.device("cuda", 0))
    launches = Launches(state)
    with FakeTensorMode():
        x = torch.empty(70, device="cuda:1")
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device", lambda d: cuda_device(state, d))
        monkeypatch.setattr(torch.cuda, "get_device_properties",
                            lambda d: types.SimpleNamespace(multi_processor_count=132))
        (out,) = registry.backend("triton").launch_traced(fn, [x, 3], config, wrap=launches)
    ((args, _, device),) = launches.calls
    assert device == torch.device("cuda", 1) and out.device == x.device
    assert args[2] == 3 and type(args[2]) is int


def test_a_triton_op_launches_without_tensor_descriptors() -> None:
    """The sm_90 GEMM default loads through TMA; torch.compile's Inductor (torch 2.11) failed
    on the host TensorDescriptor arguments of such a wrap_triton launch (on an H200), so the
    triton_op body launches the same config with pointer loads."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    matmul = kernel_of("matmul")
    spec = (("tensor", (256, 128), "f16"), ("tensor", (128, 64), "f16"))
    fn, config = lowered(matmul, spec)
    assert config.get("tma")
    launches = Launches()
    with FakeTensorMode():
        a = torch.empty(256, 128, device="cuda", dtype=torch.float16)
        b = torch.empty(128, 64, device="cuda", dtype=torch.float16)
        registry.backend("triton").launch_traced(fn, [a, b], config, wrap=launches)
    ((args, _, _),) = launches.calls
    assert not any(isinstance(x, TensorDescriptor) for x in args) and args[0] is a


def test_triton_op_refuses_a_write_it_was_not_told_of_on_cuda() -> None:
    """As the custom_op path does: torch.compile would drop a write the schema does not show."""
    op = td.torch_op(scale_, name="tdgpu_test::scale_undeclared", triton=True)
    with FakeTensorMode():
        x = torch.empty(70, device="cuda")
        with pytest.raises(td.ArgumentError, match=r"writes \['x'\] in place; declare them"):
            op(x, 2.0)
    declared = td.torch_op(scale_, name="tdgpu_test::scale_declared", triton=True,
                           mutates_args=("x",))
    with FakeTensorMode():
        declared(torch.empty(70, device="cuda"), 2.0)


# ---- backend="triton" on CuPy arrays: TritonBackend.run -----------------------------------------
class FakeCupyArray:
    """A CuPy array on a GPU, as a fake CUDA tensor behind DLPack."""

    def __init__(self, tensor: Any) -> None:
        self.tensor = tensor
        self.dtype = np.dtype(str(tensor.dtype).removeprefix("torch."))
        self.strides = tuple(s * self.dtype.itemsize for s in tensor.stride())


FakeCupyArray.__module__ = "cupy._core.core"  # what gpu.is_cupy looks at


@pytest.fixture
def cupy_on_two_gpus(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """A fake CuPy on two devices, device 0 current, with a stream made current on device 1
    (`with cupy.cuda.Device(1): stream.use()`); torch's CUDA calls recorded; the generated
    module's launch replaced by a recorder (Triton would need a GPU)."""
    state = types.SimpleNamespace(device=torch.device("cuda", 0), stream=None, launches=[],
                                  to_cupy=[], streams={0: 0, 1: 0x7E57})

    def get_current_stream(device_id: int = -1) -> Any:  # CuPy >= 13: one per device
        return types.SimpleNamespace(ptr=state.streams[0 if device_id == -1 else device_id])

    def from_dlpack(t: Any) -> FakeCupyArray:
        state.to_cupy.append(state.stream)
        return FakeCupyArray(t)

    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(get_current_stream=get_current_stream)  # type: ignore
    cupy.from_dlpack = from_dlpack  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", cupy)

    @contextmanager
    def on_stream(stream: Any) -> Iterator[None]:
        before, state.stream = state.stream, stream
        try:
            yield
        finally:
            state.stream = before

    def launch(*args: Any, empty: Any, full: Any, num_sms: int, wrap: Any = None) -> tuple:
        state.launches.append((args, state.device, state.stream, num_sms))
        return (empty(tuple(args[0].shape), "float32"),)

    monkeypatch.setattr(gpu, "gpu_torch", lambda: torch)
    monkeypatch.setattr(gpu, "load", lambda source, interpret: types.SimpleNamespace(
        launch=launch))
    monkeypatch.setattr(torch, "from_dlpack", lambda a: a.tensor)
    def external_stream(ptr: int, device: Any = None) -> tuple:  # as torch makes them
        return ("external stream", ptr, torch.device(device)) if ptr else ("new pool stream",)
    monkeypatch.setattr(torch.cuda, "ExternalStream", external_stream)
    monkeypatch.setattr(torch.cuda, "default_stream",
                        lambda device: ("default stream", torch.device(device)))
    monkeypatch.setattr(torch.cuda, "stream", on_stream)
    monkeypatch.setattr(torch.cuda, "device", lambda d: cuda_device(state, d))
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda d: types.SimpleNamespace(multi_processor_count=132))
    return state


def test_cupy_arrays_run_on_cupys_current_stream_of_their_device(
        cupy_on_two_gpus: types.SimpleNamespace) -> None:
    """CuPy keeps a current stream per device: arrays on device 1 launch on device 1's (a
    device-0 stream there is CUDA_ERROR_INVALID_HANDLE, and device 1's default stream would race
    with the work queued on its current one). The output goes back to CuPy on that stream."""
    state = cupy_on_two_gpus
    softmax = kernel_of("softmax")
    fn, config = lowered(softmax, softmax.arg_spec([np.zeros((4, 8), np.float32)]))
    with FakeTensorMode():
        x = FakeCupyArray(torch.empty(4, 8, device="cuda:1"))
        (out,) = registry.backend("triton").run(fn, [x], config)
    stream = ("external stream", 0x7E57, torch.device("cuda", 1))
    ((args, device, launched_on, sms),) = state.launches
    assert args[0] is x.tensor and device == torch.device("cuda", 1) and sms == 132
    assert launched_on == stream
    assert isinstance(out, FakeCupyArray) and out.tensor.device == torch.device("cuda", 1)
    assert state.to_cupy == [stream]


def test_cupys_null_stream_is_torchs_default_stream(
        cupy_on_two_gpus: types.SimpleNamespace) -> None:
    """CuPy's default (legacy null) stream has pointer 0, and torch.cuda.ExternalStream(0) is no
    wrapper of it but a new non-blocking stream from torch's pool: a launch there would race
    with the work CuPy queued for the inputs. torch's default stream is that null stream."""
    state = cupy_on_two_gpus
    state.streams[1] = 0
    softmax = kernel_of("softmax")
    fn, config = lowered(softmax, softmax.arg_spec([np.zeros((4, 8), np.float32)]))
    with FakeTensorMode():
        x = FakeCupyArray(torch.empty(4, 8, device="cuda:1"))
        registry.backend("triton").run(fn, [x], config)
    ((_, _, launched_on, _),) = state.launches
    assert launched_on == ("default stream", torch.device("cuda", 1))


def test_arrays_torch_or_cupy_cannot_take_are_tiledsl_errors(
        cupy_on_two_gpus: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    softmax = kernel_of("softmax")
    fn, config = lowered(softmax, softmax.arg_spec([np.zeros((4, 8), np.float32)]))
    with FakeTensorMode():
        x = FakeCupyArray(torch.empty(4, 8, device="cuda:0"))

        def no_view(a: Any) -> Any:
            raise BufferError("negative strides are not supported")
        with monkeypatch.context() as m:
            m.setattr(torch, "from_dlpack", no_view)
            with pytest.raises(td.ArgumentError, match="argument 'x' .* cannot be viewed as a "
                               "torch tensor: negative strides"):
                registry.backend("triton").run(fn, [x], config)

        def no_bfloat16(t: Any) -> Any:
            raise TypeError("CuPy does not support bfloat16")
        monkeypatch.setattr(sys.modules["cupy"], "from_dlpack", no_bfloat16)
        with pytest.raises(td.BackendError, match="CuPy cannot take an output of dtype "
                           "torch.float32 .*does not support bfloat16"):
            registry.backend("triton").run(fn, [x], config)


def test_triton_errors_at_launch_are_backend_errors(cupy_on_two_gpus: types.SimpleNamespace,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A config needing more shared memory than the GPU has fails in Triton's launch with
    OutOfResources, no RuntimeError: the tuner records TileDSLErrors as failed trials."""
    from triton.runtime.errors import OutOfResources

    def too_big(*args: Any, **kwargs: Any) -> None:
        raise OutOfResources(262144, 232448, "shared memory")
    monkeypatch.setattr(gpu, "load", lambda source, interpret: types.SimpleNamespace(
        launch=too_big))
    softmax = kernel_of("softmax")
    fn, config = lowered(softmax, softmax.arg_spec([np.zeros((4, 8), np.float32)]))
    with FakeTensorMode():
        x = FakeCupyArray(torch.empty(4, 8, device="cuda:1"))
        for call in (lambda: registry.backend("triton").run(fn, [x], config),
                     lambda: registry.backend("triton").launch_traced(
                         fn, [x.tensor], config, wrap=lambda kernel: kernel)):
            with pytest.raises(td.BackendError, match="could not compile or launch softmax on "
                               "this GPU: OutOfResources: .*shared memory"):
                call()


# ---- warming Triton's cache for GPU arrays: warmup.warm -----------------------------------------
class CupyLikeArray:
    """What `k.warm` reads of a CuPy array: shape, dtype, byte strides, the CUDA interface."""

    def __init__(self, host: np.ndarray) -> None:
        self.shape, self.dtype, self.strides = host.shape, host.dtype, host.strides
        self.__cuda_array_interface__ = {"shape": host.shape, "typestr": host.dtype.str,
                                         "strides": host.strides, "data": (1 << 20, False),
                                         "version": 3}


CupyLikeArray.__module__ = "cupy._core.core"


def test_warm_takes_gpu_arrays_as_the_launch_sees_them() -> None:
    """A CuPy array (not a torch tensor: no empty_like) and a torch CUDA view keep their strides,
    which the launch specializes on (it views them through DLPack as they are)."""
    from lowering.backends.triton.warmup import _meta

    arr = CupyLikeArray(np.zeros((8, 4), np.float32).T)
    assert _meta(torch, arr).stride() == (1, 4) and _meta(torch, arr).dtype == torch.float32
    assert kernel_of("softmax").warm(arr, arch="sm_90") == 1
    with FakeTensorMode():
        view = torch.empty_strided((4, 8), (1, 16), device="cuda")  # a column slice
    assert _meta(torch, view).stride() == (1, 16)


# ---- the overlap check on GPU tensors: arrays.check_overlap ------------------------------------
def test_the_overlap_check_reads_tensors_that_require_grad() -> None:
    """torch refuses __cuda_array_interface__ for a tensor that requires grad (RuntimeError):
    the check reads the tensor's memory all the same."""
    with FakeTensorMode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fake tensors warn that their data_ptr is meaningless
        x = torch.empty(70, device="cuda")
        y = torch.empty(70, device="cuda", requires_grad=True)
        assert arrays._extent(y) == arrays._extent(y.detach()) is not None
        arrays.share_memory(x, y)  # both fake tensors claim address 0: any answer will do


# ---- tiledsl.interop.aot: what an array says its dtype is -----------------------------------------------
class Bfloat16Array:
    """A CUDA bfloat16 array whose __cuda_array_interface__ says "<f2" (float16's typestr), as
    torch's did for bfloat16 before it switched to "<V2" and as many libraries' still do."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape
        self.dtype = np.dtype(ml_dtypes.bfloat16)
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f2", "strides": None,
                                         "data": (1 << 20, False), "version": 3}


def test_a_package_reads_an_arrays_own_dtype(tmp_path: Path) -> None:
    from tiledsl.interop.aot import load
    from tiledsl.interop.export import export

    softmax = kernel_of("softmax")
    x = np.zeros((19, 45), np.float32)
    half = load(export(softmax, tmp_path / "f16", x.astype(np.float16), arch="sm_80"))
    bf16 = load(export(softmax, tmp_path / "bf16", x.astype(ml_dtypes.bfloat16), arch="sm_80"))
    arr = Bfloat16Array((19, 45))
    assert bf16.bind((arr,), {}) == [arr]
    with pytest.raises(td.ArgumentError, match="'x' has dtype bfloat16; the package was "
                                               "compiled for float16"):
        half.bind((arr,), {})


# ---- k(*args)'s fast path for torch CUDA tensors: tiledsl/runtime/dispatch.py ------------------------------
@td.tile_kernel
def add_narrow(x, k: int):
    """Writes x in place; k meets an int8 tile, so its range is checked at every call."""
    (n,) = x.shape
    for t in td.tile(n):
        x[t] = x[t] + k


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """k(*args) on fake CUDA tensors: the generated module's launch recorded, and the fast
    path's key taking FakeTensors (dispatch.key takes plain torch tensors only)."""
    from tiledsl.runtime import dispatch
    state = types.SimpleNamespace(launches=[], where=0)

    def launch(*args: Any, empty: Any, full: Any, num_sms: int, wrap: Any = None) -> tuple:
        state.launches.append(args)
        return (args[0],)
    monkeypatch.setattr(gpu, "gpu_torch", lambda: torch)
    monkeypatch.setattr(gpu, "load", lambda source, interpret: types.SimpleNamespace(
        launch=launch))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda d: types.SimpleNamespace(multi_processor_count=132))
    where = arrays.where

    def counted(*args: Any) -> Any:
        state.where += 1
        return where(*args)
    monkeypatch.setattr(arrays, "where", counted)
    monkeypatch.setattr(torch.cuda, "device", lambda d: nullcontext())
    from torch._subclasses.fake_tensor import FakeTensor
    monkeypatch.setattr(dispatch, "tensor_type", lambda: FakeTensor)
    return state


def test_a_second_call_of_a_layout_skips_to_the_launch_and_keeps_the_value_checks(
        fake_gpu: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    """On an H200, k(*args) took 65-73 us over a bare Triton launch, most of it deciding again
    what the layout had decided: the second call skips the checks that depend on the layout
    alone, and keeps those that depend on the values (memory overlap, narrowed ints)."""
    with FakeTensorMode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = torch.empty(70, device="cuda", dtype=torch.int8)
        add_narrow(x, 3)
        assert fake_gpu.where == 1 and len(add_narrow.caches.fast) == 1
        add_narrow(x, 4)
        assert fake_gpu.where == 1 and len(fake_gpu.launches) == 2  # the fast path launched
        assert fake_gpu.launches[1][0] is x and fake_gpu.launches[1][1] == 4
        with pytest.raises(td.ArgumentError, match="argument 'k' is 300, out of the range of "
                                                   "int8"):
            add_narrow(x, 300)
        y = torch.empty(70, device="cuda", dtype=torch.float32)
        add_narrow(y, 3)  # another layout: the slow path again
        assert fake_gpu.where == 2 and len(add_narrow.caches.fast) == 2
        add_narrow.forget_tuned()
        assert not add_narrow.caches.fast


def test_the_fast_path_returns_an_optional_output_as_none_and_numbers_as_they_are(
        fake_gpu: types.SimpleNamespace) -> None:
    with FakeTensorMode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = torch.empty(40, 8, device="cuda", dtype=torch.float16)
        for _ in range(2):  # the slow path, then the fast one
            o, sums = scaled_rows(x, 0.5)
            assert o is not None and sums is None
            o, *numbers = sized_rows(x)  # and the numbers a trace computed, as they are
            assert o is not None and numbers == [8, 2.0, False]
        assert len(scaled_rows.caches.fast) == 1 and len(sized_rows.caches.fast) == 1
        assert len(fake_gpu.launches) == 4


def test_the_fast_paths_key_tells_apart_what_the_slow_path_decides(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from torch._subclasses.fake_tensor import FakeTensor

    from tiledsl.runtime import dispatch
    monkeypatch.setattr(dispatch, "tensor_type", lambda: FakeTensor)
    with FakeTensorMode():
        x = torch.empty(8, 8, device="cuda")
        same = dispatch.key([torch.empty(8, 8, device="cuda"), 2.0])
        assert same == dispatch.key([x, 3.0]) is not None
        others = [torch.empty(8, 8, device="cuda", dtype=torch.float16), x.T,
                  torch.empty(8, 8, device="cuda:1"), torch.empty(8, 8, device="cuda",
                                                                  requires_grad=True)]
        assert len({dispatch.key([o, 2.0]) for o in others} | {same}) == 5
        assert dispatch.key([x, 2]) != same  # an int scalar: another spec
        for slow in ([x, 2**63], [x, np.float32(2.0)], [torch.empty(8, device="cpu"), 2.0],
                     [2.0]):
            assert dispatch.key(slow) is None


# ---- the same paths on a real GPU (skipped without one) -----------------------------------------
on_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")


@pytest.mark.gpu
@on_gpu
def test_on_the_gpu_cupy_arrays_on_the_null_stream_and_on_a_stream_of_their_own() -> None:
    cupy = pytest.importorskip("cupy")
    x = np.random.default_rng(0).standard_normal((300, 2000)).astype(np.float32)
    want = example("softmax").reference(x)
    for stream in (cupy.cuda.Stream.null, cupy.cuda.Stream(non_blocking=True)):
        with stream:
            arr = cupy.asarray(x) * 1  # written by a kernel queued on this stream
            got = cupy.asnumpy(kernel_of("softmax")(arr))
        td.testing.assert_close(got, want, np.float32)


@pytest.mark.gpu
@on_gpu
def test_on_the_gpu_a_triton_op_with_an_int_torch_compile_makes_dynamic() -> None:
    op = td.torch_op(plus_k, name="tdgpu_test::plus_k_on_gpu", triton=True)
    x = torch.arange(70, device="cuda", dtype=torch.int32)
    torch.testing.assert_close(op(x, 5), x + 5)
    torch._dynamo.reset()
    f = torch.compile(lambda x, k: op(x, k), fullgraph=True)
    for k in (1, 2, 3):  # the second value makes k a SymInt
        torch.testing.assert_close(f(x, k), x + k)


# ---- k(*args) on torch CUDA tensors: the checks before the launch ------------------------------
def test_a_cuda_tensor_that_requires_grad_is_taken_for_reading_and_refused_for_writing() -> None:
    """As on the CPU: read as it is (the kernel is not differentiable), written never (autograd
    would not see the write). It was "pass a NumPy array": torch refuses such a tensor's
    __cuda_array_interface__, which was how CUDA tensors were told apart."""
    with FakeTensorMode():
        x = torch.empty(70, device="cuda", requires_grad=True)
        with pytest.raises(td.BackendError, match="needs an NVIDIA GPU"):  # none here
            plus_k(x, 3)
        with pytest.raises(td.ArgumentError, match="writes argument 'x' in place, and that "
                                                   "tensor requires grad"):
            scale_(x, 2.0)


def test_an_expanded_cuda_tensor_is_refused_after_a_dense_one_of_its_shape() -> None:
    """The dispatch cache is keyed by layout: torch tensors have .stride(), not .strides, so
    every layout shared one entry and the stride-0 check of the first call was the only one."""
    @td.tile_kernel
    def double_(x):
        (n,) = x.shape
        for t in td.tile(n):
            x[t] = x[t] * 2

    with FakeTensorMode():
        with pytest.raises(td.BackendError, match="needs an NVIDIA GPU"):
            double_(torch.empty(70, device="cuda"))
        with pytest.raises(td.ArgumentError, match="share memory"):
            double_(torch.empty(1, device="cuda").expand(70))
