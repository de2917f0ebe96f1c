"""Pruning before timing: a GPU tune does not time what the cost model predicts far slower than
a config it measured; the compile workers' predictions are the model's own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tiledsl as td
from autotune.prune import PRUNE_FACTOR, Pruner
from autotune.runners import Runner
from autotune.tuner import tune
from support import ROOT, example, kernel_of
from tiledsl.errors import ConfigError


def test_pruner_compares_with_the_best_prediction_measured_valid() -> None:
    p = Pruner(3.0)
    assert p.why(1000.0) is None  # nothing measured yet
    p.measured(10.0, None)  # failed: no reference
    assert p.why(1000.0) is None
    p.measured(20.0, 1.5)
    p.measured(None, 1.0)  # unpriced: no reference
    assert p.why(60.0) is None and p.why(None) is None
    assert p.why(62.0) == ("pruned: the cost model predicts 62 us, 3.1x a measured config's "
                           "20 us")
    p.measured(5.0, 9.9)  # a worse measurement with a lower prediction lowers the bar
    assert p.why(16.0) is not None
    assert Pruner(None).why(1e9) is None
    for bad in (1.0, 0.5, float("nan")):
        with pytest.raises(ConfigError, match="prune factor must be above 1"):
            Pruner(bad)


class _Precompiler:
    """Stands in for the compile workers: every config compiled ahead and priced by
    `_predict`, or (`ahead` False) none, with what the tuner asked for logged in `EVENTS`."""

    ahead = True

    def __init__(self, *_: Any, **__: Any) -> None:
        self.predicted: dict[td.Config, float] = {}

    def submit(self, configs: list[td.Config], replace: bool = False) -> None:
        EVENTS.append(("compile", list(configs)))

    def wait(self, config: td.Config, limit: float | None = None) -> bool:
        if self.ahead:
            self.predicted[config] = _predict(config)
        return self.ahead

    def close(self) -> None:
        pass


def _predict(config: td.Config) -> float:
    """Microseconds, falling with tile area (what a roofline says of re-read operands)."""
    bm, bn, _ = config.block_sizes
    return 1e5 / (bm * bn)


def _true_ms(config: td.Config) -> float:
    """The 'GPU's' time: the prediction, off by up to 1.5x, plus a bonus for 4 warps."""
    bm, bn, bk = config.block_sizes
    return _predict(config) / 1e3 * (1.0 + 0.5 * ((bm + bk) % 3) / 2) * \
        (0.9 if config.num_warps == 4 else 1.0)


EVENTS: list[tuple[str, Any]] = []  # ("compile", configs) and ("time", config), in order


class _GPU(Runner):
    unit = "ms"
    backend = "triton"
    noisy = True
    self_checking = True  # as the GPU runner: it checks where it measures (here, not at all)
    timed: list[td.Config] = []

    def measure(self, config: td.Config) -> float:
        _GPU.timed.append(config)
        EVENTS.append(("time", config))
        return _true_ms(config)

    def time(self, config: td.Config) -> float:
        return _true_ms(config)


def _gpu_tune(tmp_path: Path, monkeypatch: Any, prune: float | None,
              dims: tuple[int, int, int] = (1000, 700, 900)) -> Any:
    """A GPU tune on the CPU: the compile workers, the device and the timing are stand-ins;
    the search, the pruning and the bookkeeping are the tuner's own."""
    import autotune.precompile
    import autotune.runners
    import autotune.tuner
    import lowering.backends.triton.gpu
    monkeypatch.setattr(autotune.tuner, "require_gpu", lambda kernel: None)
    monkeypatch.setattr(lowering.backends.triton.gpu, "device_target", lambda: ("sm_90", 132))
    monkeypatch.setattr(autotune.precompile, "Precompiler", _Precompiler)
    monkeypatch.setitem(autotune.runners.RUNNERS, "triton", _GPU)
    monkeypatch.setattr(_GPU, "timed", [])
    EVENTS.clear()
    return tune(kernel_of("matmul"), _gemm(*dims), backend="triton", trials=40, isolate=False,
                prune=prune, finalists=2, storage=f"sqlite:///{tmp_path}/s.db",
                study_name=f"prune-{prune}-{dims}", use_cache=False, progress=True)


def _gemm(m: int, k: int, n: int) -> list[np.ndarray]:
    return list(example("matmul").make_inputs(np.random.default_rng(0), {"m": m, "k": k, "n": n},
                                              np.float16))


@pytest.mark.slow  # (21 s: the other pruning tests stay in the default run)
def test_a_gpu_tune_does_not_time_configs_predicted_far_slower(tmp_path: Path, monkeypatch: Any,
                                                               capsys: Any) -> None:
    r = _gpu_tune(tmp_path, monkeypatch, PRUNE_FACTOR)
    err = capsys.readouterr().err  # the progress bar's last state counts the pruned trials
    assert "40/40 [" in err
    assert all(t.predicted == _predict(t.config) for t in r.trials)
    # Replay the rule over the trials in order: pruned exactly when predicted above the factor
    # times the lowest prediction measured so far; the default is always timed.
    reference = None
    for t in r.trials:
        expect = t.config != r.default and reference is not None and \
            t.predicted > PRUNE_FACTOR * reference
        assert t.pruned == expect, t
        assert (t.value is None) == t.pruned
        if not t.pruned:
            reference = t.predicted if reference is None else min(reference, t.predicted)
    assert 0 < len(r.pruned) < len(r.trials) and not r.rejected
    assert _GPU.timed[:len(r.trials) - len(r.pruned)] == [t.config for t in r.trials
                                                          if not t.pruned]
    measured = [t for t in r.trials if not t.pruned]
    assert r.search_best == min(measured, key=lambda t: t.value).config
    assert f"{len(r.pruned)} pruned by the cost model" in r.table()
    assert f"{len(r.pruned)} pruned]" in err
    assert r.pruned[0].status.startswith("pruned: the cost model predicts")
    report = json.loads(json.dumps(r.to_json()))
    assert [t["model_us"] for t in report["trials"]] == [t.predicted for t in r.trials]
    assert len(r.to_t4()["results"]) == len(measured)  # never measured, never failed
    # Resumed, the study keeps what was pruned and the predictions, and times nothing again.
    again = _gpu_tune(tmp_path, monkeypatch, PRUNE_FACTOR)
    assert not _GPU.timed
    assert [t.status for t in again.trials] == [t.status if t.pruned else "resumed"
                                                for t in r.trials]
    assert [t.predicted for t in again.trials] == [t.predicted for t in r.trials]
    # Without pruning every proposal is timed.
    r0 = _gpu_tune(tmp_path, monkeypatch, None)
    assert not r0.pruned and len(_GPU.timed) >= len(r0.trials)


def test_what_no_worker_compiled_is_priced_from_the_ir_and_not_compiled_if_pruned(
        tmp_path: Path, monkeypatch: Any) -> None:
    """Without compiles ahead, candidates are priced by the space's estimate (the model on
    resources guessed from the IR), pruned by it, and hinted compiles skip what it would
    prune."""
    monkeypatch.setattr(_Precompiler, "ahead", False)
    dims = (4096, 4096, 4096)
    r = _gpu_tune(tmp_path, monkeypatch, PRUNE_FACTOR, dims)
    space = kernel_of("matmul").config_space(*_gemm(*dims), backend="triton")
    assert space.estimate is not None
    assert all(t.predicted == space.estimate(t.config) for t in r.trials)
    assert r.pruned and not r.rejected and len(_GPU.timed) >= len(r.trials) - len(r.pruned)
    reference = None  # the lowest estimate timed so far, event by event
    hinted = 0
    for kind, what in EVENTS:
        if kind == "time":
            e = space.estimate(what)
            reference = e if reference is None else min(reference, e)
        elif reference is not None:
            hinted += len(what)
            assert all(c == r.default or space.estimate(c) <= PRUNE_FACTOR * reference
                       for c in what)
    assert hinted > 0


def test_compile_workers_price_what_the_jit_compiled_as_the_model_runner_does(
        tmp_path: Path, monkeypatch: Any) -> None:
    """The GPU tune's predictions (from Triton's JIT compile) equal the model runner's (from
    `k.compile`): same registers, shared memory and warps."""
    pytest.importorskip("triton")
    from autotune import model
    from autotune.precompile import Precompiler
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    a, b = example("matmul").make_inputs(np.random.default_rng(0),
                                         {"m": 1000, "k": 700, "n": 900}, np.float16)
    k = kernel_of("matmul")
    configs = [td.Config((64, 64, 32), 4, 3, group_m=8, tma=False, persistent=False),
               td.Config((128, 128, 64), 8, 3, group_m=1, tma=False, persistent=False)]
    pre = Precompiler(k.file, k.name, [a, b], kind="jit", arch="sm_90", num_sms=132, workers=1)
    try:
        pre.submit(configs)
        for c in configs:
            future = pre.pending[c]
            future.result(timeout=300)  # compiled, so `wait` takes the worker's result
            assert pre.wait(c)
    finally:
        pre.close()
    for c in configs:
        resources = model.compiled_resources(k, [a, b], c)
        assert resources == model.warmed_resources(k, [a, b], c)
        assert pre.predicted[c] == pytest.approx(model.predict(k, [a, b], c, resources))
    assert pre.predicted[configs[0]] != pre.predicted[configs[1]]


def test_tune_cli_takes_a_prune_factor(capsys: Any, monkeypatch: Any) -> None:
    import autotune.tune_cli
    from tiledsl.cli.commands import main
    softmax = str(ROOT / "examples" / "softmax.py")
    assert main(["tune", softmax, "--prune", "0.5", "--no-progress"]) == 1
    assert "prune factor must be above 1" in capsys.readouterr().err
    given: list[Any] = []

    def record(*args: Any, prune: Any = "unset", **kwargs: Any) -> Any:
        given.append(prune)
        raise ConfigError("stop here")
    monkeypatch.setattr(autotune.tune_cli, "tune", record)
    for flags in ([], ["--prune", "6"], ["--no-prune"]):
        assert main(["tune", softmax, "--no-progress", *flags]) == 1
    assert given == [PRUNE_FACTOR, 6.0, None]


def test_trials_say_whether_the_model_priced_the_compiled_kernel_or_the_ir(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU tune's predictions come from the compile workers (the compiled kernel) or, for what
    no worker compiled, from resources guessed from the IR; the report and a resumed study keep
    which, so the model's check against the GPU prices the guessed ones again."""
    import autotune.precompile
    import autotune.runners
    import autotune.tuner
    import lowering.backends.triton.gpu
    monkeypatch.setattr(autotune.tuner, "require_gpu", lambda kernel: None)
    monkeypatch.setattr(lowering.backends.triton.gpu, "device_target", lambda: ("sm_90", 132))
    monkeypatch.setattr(autotune.precompile, "Precompiler", _Precompiler)
    monkeypatch.setitem(autotune.runners.RUNNERS, "triton", _GPU)

    def gpu_tune(study: str) -> Any:
        return tune(kernel_of("matmul"), _gemm(512, 256, 384), backend="triton", trials=5,
                    isolate=False, prune=None, finalists=0, use_cache=False,
                    storage=f"sqlite:///{tmp_path}/s.db", study_name=study)
    compiled = gpu_tune("ahead")
    assert [t.model_from for t in compiled.trials] == ["compiled"] * 5
    monkeypatch.setattr(_Precompiler, "ahead", False)
    guessed = gpu_tune("not-ahead")
    assert [t.model_from for t in guessed.trials] == ["ir"] * 5
    assert [t["model_from"] for t in guessed.to_json()["trials"]] == ["ir"] * 5
    resumed = gpu_tune("ahead")
    assert [t.status for t in resumed.trials] == ["resumed"] * 5
    assert [t.model_from for t in resumed.trials] == ["compiled"] * 5
