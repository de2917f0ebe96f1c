"""Checking what a tune is asked to do before anything runs: the tuning options of the Python
API (`k.autotune(...)`, `autotune.tuner.tune`) and the numbers of the
`tune` and `bench` commands. A bad value is an error that names the option (and the kernel)
before the search starts, not a TypeError from deep inside it or a lost report after it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from tiledsl.checks import is_int, is_number
from tiledsl.errors import ConfigError

MAX_SEED = 2**32 - 1  # NumPy's and Optuna's samplers take seeds up to this


@dataclass(frozen=True)
class TuneOptions:
    """A tune's options, as `autotune.tuner.tune` takes them (its docstring says what each
    does; its signature holds the defaults)."""
    backend: str
    arch: Any
    trials: int
    timeout: float | None
    strategy: str | None
    storage: str | None
    study_name: str | None
    seed: int
    check: bool
    isolate: bool
    trial_timeout: float
    progress: bool | None
    baselines: dict[str, Callable[[], Any]]
    use_cache: bool
    finalists: int
    rounds: int
    prune: float | None

    def validate(self, kernel: str) -> None:
        """`check_tune_options` on these options."""
        check_tune_options(kernel, trials=self.trials, timeout=self.timeout,
                           strategy=self.strategy, prune=self.prune, finalists=self.finalists,
                           seed=self.seed, trial_timeout=self.trial_timeout)


def check_tune_options(kernel: str, *, trials: Any, timeout: Any, strategy: Any, prune: Any,
                       finalists: Any, seed: Any, trial_timeout: Any = 60.0) -> None:
    """Raise a ConfigError naming the option and `kernel` for a value `tune` cannot use:
    `trials` an integer >= 1; `timeout` None or seconds > 0; `trial_timeout` seconds > 0;
    `strategy` None (the default) or
    a registered strategy's name; `prune` None (time every config) or a factor above 1;
    `finalists` an integer >= 0; `seed` an integer from 0 to 2**32 - 1."""
    def bad(message: str) -> ConfigError:
        return ConfigError(message, kernel=kernel)
    if not is_int(trials) or trials < 1:
        raise bad(f"trials must be an integer of at least 1, got {trials!r}")
    if timeout is not None and not (is_number(timeout) and timeout > 0):
        raise bad(f"timeout must be a number of seconds above 0 (or None for no limit), "
                  f"got {timeout!r}")
    if not (is_number(trial_timeout, finite=True) and trial_timeout > 0):
        raise bad(f"trial_timeout must be a finite number of seconds above 0, "
                  f"got {trial_timeout!r}")
    if strategy is not None:
        if not isinstance(strategy, str):
            raise bad(f"strategy must be a strategy's name (or None for the default), "
                      f"got {strategy!r}")
        from autotune.strategies import get
        try:
            get(strategy)  # loads every strategy module; unknown names are ConfigErrors
        except ConfigError as e:
            raise e.with_context(kernel=kernel) from None
    if prune is not None and not (is_number(prune) and prune > 1):
        raise bad(f"prune factor must be above 1 (or None to time every config), got {prune!r}")
    if not is_int(finalists) or finalists < 0:
        raise bad(f"finalists must be an integer of at least 0 (0 keeps the search's fastest "
                  f"trial), got {finalists!r}")
    if not is_int(seed) or not 0 <= seed <= MAX_SEED:
        raise bad(f"seed must be an integer from 0 to 2**32 - 1, got {seed!r}")


def require(ok: bool, option: str, rule: str, value: Any) -> None:
    """A command-line number out of range: an error naming the option (exit status 2)."""
    if not ok:
        from tiledsl.cli.inputs import CLIError
        raise CLIError(f"{option} must be {rule}, got {value!r}")
