"""backend="triton" on a real GPU (skipped without one), and its errors on machines without."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tiledsl as td
from lowering.backends.triton.interpret import to_numpy, to_torch
from support import EXAMPLE_NAMES, example, fresh, kernel_of, on_cuda

torch = pytest.importorskip("torch")
HAS_GPU = torch.cuda.is_available()
gpu = pytest.mark.skipif(not HAS_GPU, reason="needs an NVIDIA GPU")


def test_numpy_arrays_on_the_gpu_backend_are_a_clear_error() -> None:
    args = example("softmax").make_inputs(np.random.default_rng(0))
    with pytest.raises(td.BackendError, match="runs on GPU arrays") as info:
        kernel_of("softmax").run(*args, backend="triton")
    assert info.value.kernel is None or info.value.kernel == "softmax"
    assert "backend='triton-interpret'" in info.value.hint


@pytest.mark.skipif(HAS_GPU, reason="checks the message given when there is no GPU")
def test_no_gpu_is_a_clear_error() -> None:
    from lowering.backends.triton.gpu import gpu_torch
    with pytest.raises(td.BackendError, match="needs an NVIDIA GPU and driver"):
        gpu_torch()


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16],
                         ids=["f32", "f16", "bf16"])
@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_examples_on_torch_cuda(name: str, dtype: type) -> None:
    mod = example(name)
    args = mod.make_inputs(np.random.default_rng(3), dtype=dtype)
    ref = mod.reference(*fresh(args))
    cuda = on_cuda(fresh(args))  # lists of arrays and captured arrays too
    out = kernel_of(name)(*cuda)  # picks backend="triton" for CUDA tensors
    if out is None:
        out = cuda[0]
    outs = out if isinstance(out, tuple) else (out,)
    assert all(o.is_cuda for o in outs)
    td.testing.assert_close(tuple(to_numpy(o.cpu()) for o in outs), ref, dtype)


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("name", ["matmul", "softmax", "layer_norm"])
def test_sampled_configs_on_gpu(name: str) -> None:
    mod = example(name)
    args = mod.make_inputs(np.random.default_rng(4), dtype=np.float16)
    cuda = [to_torch(a).cuda() if isinstance(a, np.ndarray) else a for a in args]
    ref = mod.reference(*args)
    for config in kernel_of(name).config_space(*args, backend="triton").sample(4, seed=0):
        out = kernel_of(name).run(*cuda, backend="triton", config=config)
        td.testing.assert_close(to_numpy(out.cpu()), ref, np.float16)


@pytest.mark.gpu
@gpu
def test_cupy_arrays_in_and_out() -> None:
    cupy = pytest.importorskip("cupy")
    mod = example("matmul")
    a, b = mod.make_inputs(np.random.default_rng(5), dtype=np.float32)
    out = mod.matmul(cupy.asarray(a), cupy.asarray(b))
    assert isinstance(out, cupy.ndarray)
    td.testing.assert_close(cupy.asnumpy(out), mod.reference(a, b), np.float32)
    with pytest.raises(td.ArgumentError, match="'a' is a cupy array on cuda:0, 'b' is a torch"):
        mod.matmul(cupy.asarray(a), torch.from_numpy(b).cuda())


@pytest.mark.gpu
@gpu
def test_run_cli_moves_the_example_inputs_to_the_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    from support import ROOT
    from tiledsl.cli.commands import main
    for name in ("softmax", "matmul"):
        assert main(["run", str(ROOT / "examples" / f"{name}.py"), "--backend", "triton",
                     "--samples", "2"]) == 0
        assert capsys.readouterr().out.count(" ok") == 3

