"""Kernels take any DLPack array (NumPy, torch, JAX, CuPy) and return the caller's kind."""

import numpy as np
import torch

from examples.softmax import softmax  # run from the repository root

x = np.random.default_rng(0).standard_normal((70, 130)).astype(np.float32)
out = softmax(torch.from_numpy(x))  # torch CPU tensor in, torch tensor out (zero-copy views)
assert isinstance(out, torch.Tensor)
torch.testing.assert_close(out, torch.softmax(torch.from_numpy(x), dim=-1))
try:
    import jax.numpy as jnp
except ImportError:
    jnp = None
if jnp is not None:
    out = softmax(jnp.asarray(x))  # a JAX array in, a JAX array out
    np.testing.assert_allclose(np.asarray(out), np.asarray(torch.softmax(torch.from_numpy(x), -1)),
                               rtol=1e-5, atol=1e-6)
print("softmax on torch" + (" and JAX" if jnp is not None else "") + " arrays: ok")
