"""Where tiledsl keeps files between runs (generated modules, compiles, studies, tuned configs)."""

from __future__ import annotations

import os
from pathlib import Path

from tiledsl.errors import ConfigError


def cache_dir() -> Path:
    """`$TILEDSL_CACHE_DIR`, else `~/.cache/tiledsl`."""
    root = os.environ.get("TILEDSL_CACHE_DIR") or os.path.join(Path.home(), ".cache", "tiledsl")
    return Path(root)


def writable_cache_dir() -> Path:
    """The cache directory, made if missing; a ConfigError now if it cannot be written (before a
    tune whose result would be lost at the end)."""
    root = cache_dir()
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe = root / f".write-test-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as e:
        raise ConfigError(f"the cache directory {root} ($TILEDSL_CACHE_DIR, else "
                          f"~/.cache/tiledsl) cannot be written: {e}") from None
    return root
