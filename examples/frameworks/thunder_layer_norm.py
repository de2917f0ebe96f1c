"""Route torch.nn.functional.layer_norm to a tile kernel inside Lightning Thunder."""

import torch

from tiledsl.interop import thunder as tdt

from examples.layer_norm import layer_norm  # run from the repository root (x, weight, bias, eps)

thunder = tdt.import_thunder()  # import thunder (with torch 2.13's compatibility shim)
F = torch.nn.functional

ex = tdt.executor()  # a thunder.extend.OperatorExecutor named "tiledsl"
op = tdt.route(ex, F.layer_norm, layer_norm,
               adapt=lambda x, shape, weight=None, bias=None, eps=1e-5: (x, weight, bias, eps),
               checker=lambda x, shape, weight=None, bias=None, eps=1e-5:
                   weight is not None and bias is not None and len(shape) == 1)


def block(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5) * 2


jitted = thunder.jit(block, executors=[ex, *thunder.get_default_executors()])
x, w, b = torch.randn(37, 203), torch.randn(203), torch.randn(203)
torch.testing.assert_close(jitted(x, w, b), block(x, w, b), rtol=1e-4, atol=1e-4)
assert op.name in str(thunder.last_traces(jitted)[-1])  # the kernel ran, not torch's
print(f"layer_norm ran as {op.name} in the Thunder trace")
