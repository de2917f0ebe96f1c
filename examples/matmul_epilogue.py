"""Matrix multiplication with a callable epilogue, as Helion's `matmul` writes it:
out = epilogue(x @ y, (tile_m, tile_n)).

`epilogue` is a compile-time argument: the kernel body calls the Python function on the float32
accumulator and the output tile's handles while it traces, so what it computes is fused into the
kernel's store. Arrays the function captures (`bias` below) become tensor arguments of the
kernel, as Helion lifts a closure's tensors; the kernel is traced once per function code, not
once per call. make_inputs passes a bias + ReLU epilogue; the default is the identity.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def matmul_epilogue(x, y, epilogue=lambda acc, tile: acc):
    m, k = x.shape
    _, n = y.shape
    acc_dtype = td.float64 if x.dtype == td.float64 else td.float32
    out = td.empty((m, n), dtype=x.dtype)
    for tile_m, tile_n in td.tile(m, n):
        acc = td.zeros((tile_m, tile_n), dtype=acc_dtype)
        for tile_k in td.tile(k):
            acc += x[tile_m, tile_k] @ y[tile_k, tile_n]
        out[tile_m, tile_n] = epilogue(acc, (tile_m, tile_n))
    return out


DIMS = {"m": 150, "k": 100, "n": 90}


def bias_relu(bias: np.ndarray):
    """The epilogue relu(acc + bias[column]); the kernel lifts `bias` into an argument."""
    return lambda acc, tile: td.maximum(acc + bias[tile[1]], 0.0)


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32) -> tuple:
    """Random (m, k) and (k, n) matrices and a bias + ReLU epilogue over a random bias."""
    m, k, n = dims["m"], dims["k"], dims["n"]
    x = rng.standard_normal((m, k)).astype(dtype)
    y = rng.standard_normal((k, n)).astype(dtype)
    return x, y, bias_relu(rng.standard_normal(n).astype(dtype))


def _captured_bias(epilogue) -> np.ndarray | None:
    """The `bias` a bias_relu epilogue holds (None for another function)."""
    cells = dict(zip(epilogue.__code__.co_freevars, epilogue.__closure__ or ()))
    return cells["bias"].cell_contents if "bias" in cells else None


def reference(x, y, epilogue) -> np.ndarray:
    """x @ y in float64, then relu(. + bias) for a bias_relu epilogue (else nothing)."""
    acc = x.astype(np.float64) @ y.astype(np.float64)
    bias = _captured_bias(epilogue)
    return acc if bias is None else np.maximum(acc + bias.astype(np.float64), 0.0)


def baseline(xp, x, y, epilogue):
    """What a user of the array library writes, in the input dtype."""
    bias = _captured_bias(epilogue)
    out = x @ y
    return out if bias is None else xp.maximum(out + bias, 0)


def main() -> None:
    """Run on the NumPy backend with the default dims and print the relative error."""
    rng = np.random.default_rng(0)
    args = make_inputs(rng)
    out = matmul_epilogue(*args)
    print(f"matmul_epilogue: relative error {td.testing.relative_error(out, reference(*args)):.2e}")


if __name__ == "__main__":
    main()
