"""The autotuner's CLI subcommands, registered with tiledsl's CLI."""

from autotune import bench_cli as bench_cli  # noqa: F401 (`tiledsl bench`)
from autotune import replay as replay  # noqa: F401 (`tiledsl replay`)
from autotune import tune_cli as tune_cli  # noqa: F401 (`tiledsl tune`)
