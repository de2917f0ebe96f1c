"""The autotuner (Optuna search over the compiler's config space) lands with issue 5."""
