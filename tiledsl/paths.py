"""Where tiledsl keeps files between runs (generated modules, compiles, studies, tuned configs)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """`$TILEDSL_CACHE_DIR`, else `~/.cache/tiledsl`."""
    root = os.environ.get("TILEDSL_CACHE_DIR") or os.path.join(Path.home(), ".cache", "tiledsl")
    return Path(root)
