"""Pruning before timing: a GPU tune skips timing a config that the cost model
(lowering/backends/triton/cost.py) predicts far slower than a config it has already measured.

The rule: if the model's ratio between two configs is right to within `factor`, a config
predicted more than `factor` times slower than some measured config M is slower than M, so it
cannot be the fastest; timing it would only spend the measuring process's time, the serial part
of a GPU tune (compiles run ahead, in parallel). So a candidate is pruned when its prediction
exceeds `factor` times the lowest prediction among the configs measured valid so far.

Predictions come free with the compile workers' compiles (precompile.py). A candidate no worker
compiled is priced on resources guessed from the IR (the Triton space's `estimate`), so it is
pruned before anything compiles it, and the tuner does not hint such configs to the workers.
The tuner never prunes the default config (the speedup is measured against it). A pruned trial is recorded as failed, with the model's numbers as its
status, so resumed and shared studies do not time it either.
"""

from __future__ import annotations

from tiledsl.errors import ConfigError

# How far the model's ratios may be off before pruning loses the fastest config. The model is a
# roofline with occupancy, waves and a coarse pipelining rule: it ignores the instruction mix
# and guesses the L2's reuse, so it can miss a config's real speed by 2x; what it predicts 4x
# slower (tiny tiles that re-read their operands many times, spills, starved SMs) is slow. Not
# yet checked on a GPU: the GPU tune's `model_check` (benchmarks/tune_gpu.py) reports the
# factor each tune needed.
PRUNE_FACTOR = 4.0
PRUNED = "pruned"  # how a pruned trial's status begins


class Pruner:
    """Decides, from predictions, which candidates are not worth timing."""

    def __init__(self, factor: float | None = PRUNE_FACTOR) -> None:
        if factor is not None and not factor > 1.0:
            raise ConfigError(f"prune factor must be above 1 (or None to time every config), "
                             f"got {factor!r}")
        self.factor = factor
        self.reference: float | None = None  # the lowest prediction of a config measured valid

    def measured(self, predicted: float | None, value: float | None) -> None:
        """Tell the pruner a config was measured (`value` None if it failed)."""
        if predicted is not None and value is not None and \
                (self.reference is None or predicted < self.reference):
            self.reference = predicted

    def why(self, predicted: float | None) -> str | None:
        """Why a candidate with this prediction should not be timed (None: time it)."""
        if self.factor is None or predicted is None or self.reference is None:
            return None
        if predicted <= self.factor * self.reference:
            return None
        return (f"{PRUNED}: the cost model predicts {predicted:.4g} us, "
                f"{predicted / self.reference:.1f}x a measured config's {self.reference:.4g} us")
