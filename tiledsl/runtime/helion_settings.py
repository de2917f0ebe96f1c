"""The settings `@helion.kernel(...)` takes besides `config` (`helion/runtime/settings.py`), which
`@td.tile_kernel(...)` accepts so that a kernel ported from Helion keeps its decorator. None
changes what a kernel computes. tiledsl's own choices make most of them moot:

- it traces and compiles per shape (`static_shapes`), multiplies float32 in IEEE float32 on
  every backend (`dot_precision`, `fast_math`), and never tunes on a call (`autotune_effort`,
  `force_autotune`): `k.autotune(...)` does, checking every config against the NumPy backend,
  the semantics (`autotune_baseline_fn`, `autotune_accuracy_check` and their tolerances);
- logging, caching and the search's own knobs (`autotune_log*`, `autotune_precompile*`,
  `autotune_random_seed`, ...) belong to Helion's autotuner.

They are kept on the kernel (`k.settings`). `configs=[...]` (Helion's candidates for its
autotuner) pins the first, as `config=` does; `key=` (Helion's extra cache key) changes nothing,
since tiledsl keys its caches on every argument that shapes the trace.
"""

from __future__ import annotations

HELION_SETTINGS = frozenset({
    "allow_warp_specialize", "autotune_accuracy_check", "autotune_adaptive_timeout",
    "autotune_baseline_accuracy_check_fn", "autotune_baseline_atol", "autotune_baseline_fn",
    "autotune_baseline_rtol", "autotune_benchmark_fn", "autotune_benchmark_subprocess",
    "autotune_benchmark_timeout", "autotune_best_available_max_cache_scan",
    "autotune_best_available_max_configs", "autotune_best_of_k", "autotune_budget_seconds",
    "autotune_cache", "autotune_compile_timeout", "autotune_config_filter",
    "autotune_config_overrides", "autotune_effort", "autotune_force_persistent",
    "autotune_ignore_errors", "autotune_initial_population_strategy", "autotune_log",
    "autotune_log_details", "autotune_log_level", "autotune_log_search_space",
    "autotune_log_search_space_path", "autotune_log_search_space_verbose",
    "autotune_max_generations", "autotune_precompile", "autotune_precompile_jobs",
    "autotune_progress_bar", "autotune_random_seed", "autotune_rebenchmark_threshold",
    "autotune_search_acf", "autotune_seed_configs", "autotune_suspicious_rebenchmark_ratio",
    "autotune_with_torch_compile_fusion", "autotuner_fn", "backend", "debug_dtype_asserts",
    "disable_autotuner_heuristics", "distributed", "dot_precision", "fast_math",
    "force_autotune", "ignore_warnings", "index_dtype", "output_origin_lines",
    "persistent_reserved_sms", "print_output_code", "print_repro", "ref_mode",
    "torch_compile_fusion", "triton_do_not_specialize", "key",
})
