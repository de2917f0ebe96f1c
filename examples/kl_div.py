"""KL divergence loss, as Helion's `kl_div_forward` writes it: `log_target` and `reduction` are
compile-time arguments.

y_pred holds log-probabilities; y_true holds probabilities (or log-probabilities when
`log_target`). Each element's loss is y_true * (log(y_true) - y_pred) (exp(y_true) * (y_true -
y_pred) in log space). `reduction` picks what is returned: "none" (the elementwise losses),
"sum", "mean" (over all elements) or "batchmean" (over rows, PyTorch's KLDivLoss default). The
kernel branches on both with plain Python `if`: a bool or str argument is a Python value while
the kernel traces, and each value gets its own trace. The grid runs over row tiles summing the
losses of their rows; a one-program grid then reduces the row sums to the returned scalar.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def kl_div(y_pred, y_true, log_target: bool = False, reduction: str = "batchmean",
           eps: float = 1e-10):
    bt, v = y_pred.shape
    cdt = td.float64 if y_pred.dtype == td.float64 else td.float32  # computed in
    if reduction == "none":
        loss = td.zeros((bt, v), dtype=y_pred.dtype)
    else:
        loss = td.zeros((bt,), dtype=cdt)
    for tile_bt in td.tile(bt):
        loss_sum = td.zeros((tile_bt,), dtype=cdt)
        for tile_v in td.tile(v):
            y_pred_val = y_pred[tile_bt, tile_v].astype(cdt)
            y_true_val = y_true[tile_bt, tile_v].astype(cdt)
            if log_target:  # KL(P || Q) = exp(y_true) * (y_true - y_pred) in log space
                kl_loss = td.exp(y_true_val) * (y_true_val - y_pred_val)
            else:  # KL(P || Q) = y_true * (log(y_true) - y_pred)
                log_true = td.log(td.maximum(y_true_val, eps))
                kl_loss = y_true_val * (log_true - y_pred_val)
            if reduction == "none":
                loss[tile_bt, tile_v] = kl_loss
            else:
                loss_sum += td.sum(kl_loss, axis=1)
        if reduction != "none":
            loss[tile_bt] = loss_sum
    if reduction == "none":
        return loss
    final_loss = td.empty((1,), dtype=y_pred.dtype)
    for _ in td.grid(1):  # the final reduction over the row sums
        total = td.sum(loss[:])
        if reduction == "batchmean":
            total = total / bt
        elif reduction == "mean":
            total = total / (bt * v)
        final_loss[0] = total
    return final_loss


DIMS = {"bt": 150, "v": 300}
REDUCTIONS = ("batchmean", "sum", "mean", "none")


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(axis=1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32,
                log_target: bool = False, reduction: str = "batchmean") -> tuple:
    """Log-probabilities y_pred and probabilities y_true (log-probabilities if `log_target`)
    over rows of v classes, then log_target, reduction and eps."""
    bt, v = dims["bt"], dims["v"]
    y_pred = _log_softmax(rng.standard_normal((bt, v)))
    y_true = _log_softmax(rng.standard_normal((bt, v)))
    if not log_target:
        y_true = np.exp(y_true)
    return y_pred.astype(dtype), y_true.astype(dtype), log_target, reduction, 1e-10


def reference(y_pred, y_true, log_target, reduction, eps) -> np.ndarray:
    """The loss in float64 (a (1,) array unless reduction is "none")."""
    p, t = y_pred.astype(np.float64), y_true.astype(np.float64)
    loss = np.exp(t) * (t - p) if log_target else t * (np.log(np.maximum(t, eps)) - p)
    if reduction == "none":
        return loss
    scale = {"batchmean": p.shape[0], "mean": p.size, "sum": 1}[reduction]
    return np.array([loss.sum() / scale])


def baseline(xp, y_pred, y_true, log_target, reduction, eps):
    """What a user of the array library writes, in the input dtype."""
    if log_target:
        loss = xp.exp(y_true) * (y_true - y_pred)
    else:
        loss = y_true * (xp.log(xp.maximum(y_true, y_true.dtype.type(eps))) - y_pred)
    if reduction == "none":
        return loss
    scale = {"batchmean": y_pred.shape[0], "mean": y_pred.size, "sum": 1}[reduction]
    return loss.reshape(-1).sum(keepdims=True) / y_pred.dtype.type(scale)


def main() -> None:
    """Run every reduction on the NumPy backend and print the relative errors."""
    rng = np.random.default_rng(0)
    for log_target in (False, True):
        for reduction in REDUCTIONS:
            args = make_inputs(rng, log_target=log_target, reduction=reduction)
            err = td.testing.relative_error(kl_div(*args), reference(*args))
            print(f"kl_div(log_target={log_target}, reduction={reduction!r}): relative error "
                  f"{err:.2e}")


if __name__ == "__main__":
    main()
