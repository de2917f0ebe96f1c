"""Generalized Jensen-Shannon divergence with its gradient, as Helion's `jsd_forward` writes it
(after liger_kernel's JSD for knowledge distillation):
JSD(beta)(P || Q) = beta * KL(P || M) + (1 - beta) * KL(Q || M), with M = beta * P + (1 - beta) * Q,
where Q = exp(_input) (the student's log-probabilities) and P = exp(target) (the teacher's).
beta = 0 is the forward KL(P || Q) and beta = 1 the reverse KL(Q || P), each computed directly.

The arguments are Helion's: `shift_labels` is None (a compile-time argument: the plain `if` on
it runs while tracing) or a (BT,) array of labels, where rows labelled `ignore_index` add no loss
and get a zero gradient; `beta` and `ignore_index` are runtime scalars, so `if beta == 0.0:` is a
runtime `if` (each program takes its branch) and one compiled kernel serves every beta
(`td.constexpr(beta)` specializes it instead). The grid runs over single rows
(`block_size=cdiv(BT, n_rows)`, which is 1, as liger's kernel uses) and tiles of the vocabulary.
The kernel returns the summed loss (a 0-d array) and dX, the gradient of the loss with
respect to `_input`.

Where this differs from Helion's text, and why:
- Helion counts the non-ignored rows on the host (`(shift_labels != ignore_index).sum().item()`)
  and returns zeros early when there are none. A tiledsl kernel cannot read a tensor on the host,
  so a first grid counts them into `n_non_ignore` (a one-element tensor: `1.0 / n_non_ignore[0]`
  is the scale); with no rows left, every row takes the ignored branch, which gives the same
  zeros.
- Helion skips an ignored row with `continue` inside its `hl.tile` loop, on
  `shift_labels[tile_bt] == ignore_index` (a one-element tensor). Here the ignored row is the
  `if` branch and the rest is its `else` (a td.tile() loop cannot contain `continue`), and the
  label is read as a scalar, `shift_labels[tile_bt.begin]` (an `if` takes a scalar, not a tile
  of one lane).
- Helion sums the (BT, V) loss on the host (`torch.sum(loss)`, with a TensorOperationInWrapper
  warning); here a last one-program grid sums it, in float32 as Helion's, and returns it in the
  input's dtype (Helion returns float32; its HelionJSD module casts it).
- The loss buffer is float64 for float64 inputs (Helion's is always float32), so float64 runs
  keep float64 accuracy.
- torch.amax, torch.exp, torch.log and torch.maximum are td.max(axis=0), td.exp, td.log and
  td.maximum.
"""

from __future__ import annotations

import numpy as np

import tiledsl as td


@td.tile_kernel
def jsd(_input, target, shift_labels=None, beta: float = 0.5, ignore_index: int = -100):
    BT, V = _input.shape
    n_rows = BT

    # Output tensors: the loss of each element (summed at the end) and the gradient
    loss_dtype = td.float64 if _input.dtype == td.float64 else td.float32
    loss = td.zeros(_input.shape, dtype=loss_dtype)
    dX = td.empty_like(_input)

    # Count non-ignored rows (Helion counts them on the host)
    n_non_ignore = td.full((1,), float(BT), dtype=loss_dtype)
    if shift_labels is not None:
        for _ in td.grid(1):
            count = td.zeros((), dtype=td.int64)
            for tile_c in td.tile(BT):
                count += td.sum(shift_labels[tile_c] != ignore_index)
            n_non_ignore[0] = count.astype(loss_dtype)

    # Process each sequence position
    BT_SIZE = -(-BT // n_rows)  # helion.cdiv(BT, n_rows): the liger kernel uses 1
    for tile_bt in td.tile(BT, block_size=BT_SIZE):
        if shift_labels is not None and shift_labels[tile_bt.begin] == ignore_index:
            for tile_X in td.tile(V):
                dX[tile_bt, tile_X] = td.zeros((tile_bt, tile_X), dtype=_input.dtype)
        else:
            for tile_v in td.tile(V):
                X = _input[tile_bt, tile_v]
                Y = target[tile_bt, tile_v]
                X_max = td.max(X, axis=0)
                Y_max = td.max(Y, axis=0)

                if beta == 0.0:  # Forward KL: KL(P || Q)
                    Y_shift = Y - Y_max
                    Y_prob = td.exp(Y_shift) * td.exp(Y_max)  # Compensate for the shift
                    loss[tile_bt, tile_v] = Y_prob * (Y - X)
                    dX[tile_bt, tile_v] = -Y_prob
                elif beta == 1.0:  # Reverse KL: KL(Q || P)
                    X_shift = X - X_max
                    X_prob = td.exp(X_shift) * td.exp(X_max)  # Compensate for the shift
                    loss[tile_bt, tile_v] = X_prob * (X - Y)
                    dX[tile_bt, tile_v] = loss[tile_bt, tile_v] + X_prob
                else:  # General JSD: beta * KL(P || M) + (1 - beta) * KL(Q || M)
                    max_val = td.maximum(X_max, Y_max)
                    X_shifted = X - max_val
                    Y_shifted = Y - max_val

                    exp_max = td.exp(max_val)

                    Q = td.exp(X_shifted) * exp_max  # = exp(X)
                    P = td.exp(Y_shifted) * exp_max  # = exp(Y)

                    beta_P = beta * P
                    one_minus_beta_Q = (1 - beta) * Q
                    M = beta_P + one_minus_beta_Q
                    log_M = td.log(M)  # No need to compensate as M is already in original scale

                    loss[tile_bt, tile_v] = beta_P * Y + one_minus_beta_Q * X - M * log_M
                    dX[tile_bt, tile_v] = one_minus_beta_Q * (X - log_M)

                # Normalize by the number of non-ignored rows
                scale = 1.0 / n_non_ignore[0]
                loss[tile_bt, tile_v] = loss[tile_bt, tile_v] * scale
                dX[tile_bt, tile_v] = dX[tile_bt, tile_v] * scale

    # Sum the loss (Helion sums it on the host)
    final_loss = td.empty((), dtype=_input.dtype)
    for _ in td.grid(1):
        total = td.zeros((), dtype=loss_dtype)
        for tile_sb, tile_sv in td.tile(BT, V):
            total += td.sum(loss[tile_sb, tile_sv])
        final_loss[()] = total

    return final_loss, dX


DIMS = {"bt": 150, "v": 300}
BETAS = (0.5, 0.0, 1.0)


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(axis=1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))


def make_inputs(rng: np.random.Generator, dims: dict[str, int] = DIMS, dtype=np.float32,
                beta: float = 0.5, labels: bool = True) -> tuple:
    """Student and teacher log-probabilities over rows of v classes, then int64 labels of the
    rows (about one in four is ignore_index, -100; None without `labels`), beta and
    ignore_index."""
    bt, v = dims["bt"], dims["v"]
    log_q = _log_softmax(rng.standard_normal((bt, v))).astype(dtype)
    log_p = _log_softmax(rng.standard_normal((bt, v))).astype(dtype)
    shift_labels = None
    if labels:
        shift_labels = rng.integers(0, v, bt).astype(np.int64)
        shift_labels[rng.random(bt) < 0.25] = -100
    return log_q, log_p, shift_labels, beta, -100


def _jsd(xp, x, y, labels, beta: float, ignore_index: int) -> tuple:
    """The elementwise loss and gradient, each scaled by 1 / (number of non-ignored rows)."""
    q, p = xp.exp(x), xp.exp(y)
    if beta == 0.0:
        loss, dx = p * (y - x), -p
    elif beta == 1.0:
        loss = q * (x - y)
        dx = loss + q
    else:
        m = beta * p + (1 - beta) * q
        log_m = xp.log(m)
        loss = beta * p * y + (1 - beta) * q * x - m * log_m
        dx = (1 - beta) * q * (x - log_m)
    keep = xp.ones(x.shape[0], bool) if labels is None else labels != ignore_index
    n = max(int(keep.sum()), 1)
    return xp.where(keep[:, None], loss, 0) / n, xp.where(keep[:, None], dx, 0) / n


def reference(_input, target, shift_labels, beta, ignore_index) -> tuple:
    """The summed loss and the gradient in float64."""
    loss, dx = _jsd(np, _input.astype(np.float64), target.astype(np.float64), shift_labels,
                    beta, ignore_index)
    return np.array(loss.sum()), dx


def baseline(xp, _input, target, shift_labels, beta, ignore_index):
    """What a user of the array library writes: computed in float32 (as torch's baseline),
    returned in the input's dtype."""
    x, y = _input.astype(xp.float32), target.astype(xp.float32)
    loss, dx = _jsd(xp, x, y, shift_labels, beta, ignore_index)
    return loss.sum().astype(_input.dtype), dx.astype(_input.dtype)


def main() -> None:
    """Run each beta, with and without labels, on the NumPy backend and print the errors."""
    rng = np.random.default_rng(0)
    for beta in BETAS:
        for labels in (True, False):
            args = make_inputs(rng, beta=beta, labels=labels)
            errs = [td.testing.relative_error(o, r) for o, r in zip(jsd(*args), reference(*args))]
            print(f"jsd(beta={beta}, labels={labels}): relative error of the loss {errs[0]:.2e}, "
                  f"of dX {errs[1]:.2e}")


if __name__ == "__main__":
    main()
