"""What a writer killed mid-append leaves in a journal file: a torn last record, and its lock.

Optuna's journal is one JSON record a line, appended under a lock. A write cut short leaves a
last line that is not a whole record; Optuna then fails with a raw JSONDecodeError, and the next
append is glued to the torn bytes, which makes a line Optuna can never read again. Before a
journal is opened, `set_aside_torn_tail` keeps every whole record and moves the torn bytes to a
side file (`FILE.torn`), with a warning. A record glued to torn bytes (a file a tiledsl before
this check resumed) is cut out of its line and kept. A line in the middle of the file that
holds no record at all is not a torn tail: that is a `ConfigError`, and the file is left as is.

Optuna's lock is a symbolic link (`FILE.lock`) that a killed writer leaves behind; the next
writer waits 30 s before it breaks it. `JournalLock` takes Optuna's lock under a `flock` of
`FILE.guard`, which the kernel releases when its holder dies: a symbolic link found by the
guard's holder was left by a killed writer (or is held by a writer that takes no guard: plain
Optuna, an older tiledsl), and is broken after `ORPHAN_S`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from pathlib import Path

from optuna.storages.journal import JournalFileSymlinkLock

from tiledsl.errors import ConfigError, warn

RECORD_START = b'{"op_code"'  # how Optuna starts every record it writes
ORPHAN_S = 1.0  # a lock link the guard's holder finds is broken after this long (appends: ms)


class JournalLock:
    """Optuna's symbolic-link lock, taken under a `flock` that dies with its process (a lock
    object for `JournalFileBackend(lock_obj=...)`: acquire and release)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.link = JournalFileSymlinkLock(path)  # the lock every writer of the file takes
        self.guard: int | None = None

    def acquire(self) -> bool:
        self.guard = _flock(f"{self.path}.guard")
        try:
            if self.guard is None:  # no flock here (Windows, an NFS without locks)
                return self.link.acquire()
            orphaned = time.monotonic() + ORPHAN_S
            while True:
                try:
                    os.symlink(self.path, f"{self.path}.lock")
                    return True
                except FileExistsError:
                    if time.monotonic() > orphaned:
                        with contextlib.suppress(RuntimeError):
                            self.link.release()  # left by a killed writer
                    time.sleep(0.005)
        except BaseException:
            self._unguard()
            raise

    def release(self) -> None:
        try:
            self.link.release()
        finally:
            self._unguard()

    def _unguard(self) -> None:
        if self.guard is not None:
            os.close(self.guard)  # closing releases the flock
            self.guard = None


def _flock(path: str) -> int | None:
    """A file descriptor holding an exclusive flock of `path` (blocks), or None where flock
    is not available."""
    try:
        import fcntl
    except ImportError:
        return None
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        os.close(fd)
        return None
    return fd


def _record(line: bytes) -> bool:
    try:
        log = json.loads(line)
    except ValueError:  # JSONDecodeError, and UnicodeDecodeError for bytes
        return False
    return isinstance(log, dict) and "op_code" in log


def _split(data: bytes, path: str) -> tuple[bytes, bytes]:
    """(every whole record, the torn bytes) of a journal's content."""
    kept: list[bytes] = []
    torn: list[bytes] = []
    lines = data.split(b"\n")
    last = lines.pop()  # after the last newline: b"" unless a record was cut short
    for number, line in enumerate(lines, start=1):
        if _record(line):
            kept.append(line + b"\n")
            continue
        start = line.rfind(RECORD_START)
        if start > 0 and _record(line[start:]):  # a record appended to torn bytes
            torn.append(line[:start])
            kept.append(line[start:] + b"\n")
        elif number == len(lines) and not last:  # the last line, its newline written
            torn.append(line + b"\n")
        else:
            raise ConfigError(f"study journal {path}: line {number} holds no record "
                              f"({line[:60]!r}); the records after it may depend on it: "
                              "restore the file from a backup, or remove the line by hand")
    if last:
        torn.append(last)
    return b"".join(kept), b"".join(torn)


def set_aside_torn_tail(path: str) -> None:
    """Keep the whole records of the journal at `path`; move torn bytes to `path`.torn."""
    file = Path(path)
    if not file.is_file():
        return
    lock = JournalLock(path)  # the one every writer takes to append
    lock.acquire()
    try:
        data = file.read_bytes()
        kept, torn = _split(data, path)
        if not torn:
            return
        side = Path(f"{path}.torn")
        with open(side, "ab") as f:
            f.write(torn + b"\n")
            f.flush()
            os.fsync(f.fileno())
        if data.startswith(kept):
            os.truncate(path, len(kept))  # the common case: the torn bytes end the file
        else:
            temp = Path(f"{path}.repair")
            temp.write_bytes(kept)
            shutil.copymode(path, temp)
            os.replace(temp, path)
    finally:
        lock.release()
    warn(f"study journal {path}: {len(torn)} byte(s) were not a whole record (a write cut "
         f"short: a crash, a full disk); every whole record is kept, the torn bytes are set "
         f"aside in {side}")
