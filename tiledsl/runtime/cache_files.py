"""Reading and writing entries of tiledsl's cache directory (tiledsl/runtime/paths.py), which nothing but
tiledsl writes and nothing vouches for: a file there may have been edited, truncated by a full
disk, or replaced by something that is not a file at all (a FIFO would block a reader forever).

So every entry is read through `read_entry` (a regular file, not a link, of bounded size, opened
without blocking) and checked against a digest before it is used: a generated module against the
source it must hold, a JSON entry against the SHA-256 sealed into it (`seal`/`unseal`). An entry
that fails is ignored (a cache miss, so it is rewritten), and a TileDSLWarning says which and
why, once per entry and reason.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from tiledsl.errors import warn
from tiledsl.runtime.paths import UnsafeFile, read_regular_file

MAX_ENTRY_BYTES = 64 << 20  # far above any entry tiledsl writes (a cubin is a few MB at most)
_warned: set[tuple[str, str]] = set()


def ignored(path: Path, reason: str) -> None:
    """Warn (once per entry and reason) that cache entry `path` is not used, and why."""
    if (str(path), reason) in _warned:
        return
    _warned.add((str(path), reason))
    warn(f"tiledsl ignores the cache entry {path}: {reason}; it is treated as missing (and "
         "rewritten where tiledsl writes it)")


def read_entry(path: Path, limit: int = MAX_ENTRY_BYTES) -> bytes | None:
    """The bytes of cache entry `path`; None when there is none, or when it is not a regular file
    of at most `limit` bytes (a link, a FIFO, a directory, ...) or cannot be read, with a
    warning then. Opened without following links and without blocking, so nothing hangs."""
    try:
        return read_regular_file(path, limit)
    except FileNotFoundError:
        return None
    except UnsafeFile as e:
        ignored(path, str(e))
    except OSError as e:
        ignored(path, f"it cannot be read ({e.strerror or e})")
    return None


def write_entry(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically (a temporary file renamed over it: concurrent writers of
    one entry agree, and a reader never sees half a file). Whatever was at `path` is replaced;
    a directory there is removed first if empty. Raises OSError."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir() and not path.is_symlink():
        path.rmdir()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def seal(entry: Any) -> bytes:
    """The JSON of `entry` with the SHA-256 of its canonical form, for `unseal` to check."""
    return json.dumps({"sha256": digest(_canonical(entry)), "entry": entry}, indent=1).encode()


def unseal(path: Path, limit: int = MAX_ENTRY_BYTES) -> Any:
    """The entry `seal` wrote to `path`; None (with a warning saying why) when there is none,
    when it is no regular file, or when its content does not match its digest: edited,
    truncated, or written by a tiledsl that did not seal its entries."""
    data = read_entry(path, limit)
    return None if data is None else opened(path, data)


def opened(path: Path, data: bytes) -> Any:
    """The entry sealed in `data` (read from `path`), or None with a warning (see `unseal`)."""
    try:
        sealed = json.loads(data)
    except ValueError as e:
        ignored(path, f"it is not valid JSON ({e}; truncated?)")
        return None
    if not isinstance(sealed, dict) or set(sealed) != {"sha256", "entry"}:
        ignored(path, "it has no content digest (an older tiledsl's format, or not an entry)")
        return None
    if sealed["sha256"] != digest(_canonical(sealed["entry"])):
        ignored(path, "its content does not match its digest (it was modified)")
        return None
    return sealed["entry"]
