"""The autotuner: Optuna (and reference) strategies over the compiler's config space, runners
that time or simulate candidates, a result cache, and resumable, shareable studies.

Importing it (as the `tiledsl.plugins` entry point does) registers its CLI commands."""

from autotune import commands as commands  # noqa: F401 (`tiledsl tune`, `bench`, `replay`)
from autotune import tuner as tuner  # noqa: F401 (registers the tuner service k.autotune uses)
