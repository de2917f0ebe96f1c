"""Where a benchmark writes its report: where `--out` says, else a scratch directory.

The committed results in `benchmarks/results/` change only when asked for by name
(`--out benchmarks/results/spatial.json`); a run without `--out` writes to
`$TILEDSL_BENCH_OUT`, else `~/.cache/tiledsl/benchmarks/`, and says where. (Not under
`$TILEDSL_CACHE_DIR`: some benchmarks point that at a temporary, cold cache.)
"""

from __future__ import annotations

import os
from pathlib import Path


def scratch_dir() -> Path:
    """`$TILEDSL_BENCH_OUT`, else `~/.cache/tiledsl/benchmarks`."""
    return Path(os.environ.get("TILEDSL_BENCH_OUT")
                or Path.home() / ".cache" / "tiledsl" / "benchmarks")


def out_help(name: str) -> str:
    """The `--out` option's help, naming the default."""
    return f"write the JSON report here (default: {scratch_dir() / name})"


def out_path(given: str | None, name: str) -> Path:
    """`given` (the `--out` option), else `name` in the scratch directory; its folder is made,
    and the path is printed, so a long run says at its start where its report will be."""
    path = Path(given) if given else scratch_dir() / name
    path.parent.mkdir(parents=True, exist_ok=True)
    print(f"report: {path}", flush=True)
    return path
