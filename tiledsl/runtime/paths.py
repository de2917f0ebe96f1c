"""Where tiledsl keeps files between runs (generated modules, compiles, studies, tuned configs)."""

from __future__ import annotations

import errno
import os
import stat
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


class UnsafeFile(OSError):
    """A path that is no regular file of bounded size (a link, a FIFO, a directory, ...); its
    message says what it is."""


def read_regular_file(path: Path, limit: int) -> bytes:
    """The bytes of `path` if it is a regular file (not a symbolic link) of at most `limit`
    bytes, else UnsafeFile saying what it is. Opened without following links and without
    blocking (a FIFO would block a reader until a writer came), and checked on the open file,
    so nothing can be swapped in between. FileNotFoundError if there is nothing there."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError as e:
        if e.errno == errno.ELOOP or (os.path.islink(path) and e.errno != errno.ENOENT):
            raise UnsafeFile("it is a symbolic link") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(f"it is {_kind(st.st_mode)}, not a regular file")
        if st.st_size > limit:
            raise UnsafeFile(f"it holds {st.st_size} bytes, more than the {limit} it may")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(limit + 1)
        if len(data) > limit:
            raise UnsafeFile(f"it holds more than the {limit} bytes it may")
        return data
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "a special file"
