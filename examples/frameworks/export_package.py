"""An ahead-of-time package: cubins and a manifest that run with CuPy alone, no Triton."""
import tempfile
from pathlib import Path

import numpy as np

import tiledsl as td

from examples.matmul import matmul  # run from the repository root

a = np.random.default_rng(0).random((300, 200)).astype(np.float16)
b = np.random.default_rng(1).random((200, 100)).astype(np.float16)
path = matmul.export(Path(tempfile.mkdtemp()) / "matmul_pkg", a, b, arch="sm_90")  # no GPU needed
kernel = td.load(path)  # reads and checks the manifest; imports neither Triton nor torch
print(kernel)
try:
    import cupy
    on_hopper = cupy.cuda.is_available() and cupy.cuda.Device().compute_capability == "90"
except ImportError:  # no CuPy here: the package is still checked and printable
    on_hopper = False
if on_hopper:
    out = kernel(cupy.asarray(a), cupy.asarray(b))  # a CuPy array
    np.testing.assert_allclose(cupy.asnumpy(out).astype(np.float32),
                               a.astype(np.float32) @ b.astype(np.float32), rtol=2e-2, atol=2e-1)
    print("ran on the GPU through CuPy")
