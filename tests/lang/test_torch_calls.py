"""torch's functions on tile values (lang/torch_calls.py), as Helion kernels write them:
`torch.nn.functional.softmax(x[tile_n, :], dim=1)`, `torch.amax`, `torch.bmm`, `torch.baddbmm`,
torch dtypes and `device=x.device`."""

from __future__ import annotations

import numpy as np
import pytest
from support import gpu_backend, run_on

import tiledsl as td

torch = pytest.importorskip("torch")
BACKENDS = ["numpy", "triton-interpret", gpu_backend()]


@td.tile_kernel
def softmax(x):
    """Helion's `softmax` example as written."""
    n, _m = x.size()
    out = td.empty_like(x)
    for tile_n in td.tile(n):
        out[tile_n, :] = torch.nn.functional.softmax(x[tile_n, :], dim=1)
    return out


@td.tile_kernel
def attention_step(q, k, v):
    """One key block of Helion's attention: `torch.bmm` scores, `torch.amax`, `torch.exp`,
    `torch.baddbmm` into the accumulator, torch dtypes and `device=`."""
    b, m, d = q.shape
    out = td.empty([b, m, d], dtype=torch.float32, device=q.device)
    for tb, tm in td.tile(b, m):
        s = torch.bmm(q[tb, tm, :], k[tb, :, :].transpose(1, 2), out_dtype=torch.float32)
        p = torch.exp(s - torch.amax(s, dim=-1, keepdim=True))
        acc = td.zeros([tb, tm, d], dtype=torch.float32)
        acc = torch.baddbmm(acc, p.to(v.dtype), v[tb, :, :])
        out[tb, tm, :] = acc / torch.sum(p, dim=-1, keepdim=True)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_torch_functions_on_tiles(backend: str) -> None:
    rng = np.random.default_rng(16)
    x = rng.standard_normal((37, 19)).astype(np.float16)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    td.testing.assert_close(run_on(softmax, (x,), backend), e / e.sum(1, keepdims=True),
                            np.float16)
    q, k, v = (rng.standard_normal((2, 16, 16)).astype(np.float32) for _ in range(3))
    s = q.astype(np.float64) @ k.transpose(0, 2, 1)
    p = np.exp(s - s.max(-1, keepdims=True))
    td.testing.assert_close(run_on(attention_step, (q, k, v), backend),
                            (p @ v) / p.sum(-1, keepdims=True), np.float32)


def test_a_torch_function_without_a_counterpart_names_the_call() -> None:
    @td.tile_kernel
    def gamma(x):
        out = td.empty_like(x)
        for t in td.tile(x.shape[0]):
            out[t] = torch.lgamma(x[t])
        return out

    with pytest.raises(td.TraceError, match="torch.lgamma has no tiledsl counterpart") as e:
        gamma(np.ones(4, np.float32))
    assert "out[t] = torch.lgamma(x[t])" in str(e.value)
