"""Running measurements in a separate process, so a hang, a crash or an illegal memory access
fails one trial and never the tuner.

The child builds its runner once from a `module:function` factory (so it can import the user's
kernel file and, on a GPU, create its CUDA context once), then answers configs one by one:
`measure` (a candidate: checked, then timed) or `time` (a finalist, timed again). A config that
times out or kills the child is reported as failed and the child is restarted. So is one that
raised and left the runner unusable (its `healthy()` is False: on a GPU, a sticky CUDA error
such as an illegal memory access fails every later call in that process). A factory that fails
fails every later trial with its error, without starting the child again.

Every backend measures so. The GPU and the cost model start their child by `spawn` (a CUDA
context does not survive a fork), and the child imports the kernel from its file. The CPU
backends fork where the platform allows (Linux): the child is a copy of the tuner, so a kernel
defined anywhere (in a function, a notebook) is measured without importing anything, and a
worker starts in milliseconds.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import signal
import sys
import traceback
from multiprocessing.connection import Connection, wait
from time import monotonic
from typing import Any, Callable

from tiledsl.runtime.config import Config


# Where compiles are kept. A spawned child re-imports the parent's main module, and a script that
# sets these at import (to a fresh temporary folder, say) would point the child elsewhere: every
# child is given the parent's values instead, so measurements find what compile workers made.
CACHE_VARIABLES = ("TRITON_CACHE_DIR", "TILEDSL_CACHE_DIR")


def cache_environment() -> dict[str, str | None]:
    """This process's cache locations, for `adopt_environment` in a child."""
    return {name: os.environ.get(name) for name in CACHE_VARIABLES}


def adopt_environment(env: dict[str, str | None]) -> None:
    for name, value in env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


class TrialFailed(Exception):
    """A candidate could not be measured: it crashed, hung, raised, or gave wrong numbers."""


class OutOfTime(TrialFailed):
    """The tune's own deadline came while a trial was measured: the trial was stopped, which
    says nothing about its config (it is not stored as a failure). Its message starts with
    STOPPED."""


STOPPED = "stopped"


def fork_start() -> str:
    """The start method for a child that needs no CUDA context: `fork` on Linux (a copy of the
    tuner, started in milliseconds), `spawn` elsewhere (macOS and Windows)."""
    return "fork" if sys.platform.startswith("linux") else "spawn"


def died(exitcode: int | None) -> str:
    """Why a measuring process ended, in words (a negative exit code is a signal's number)."""
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"the measuring process died of {name} (the candidate crashed it)"
    if exitcode is None:
        return "the measuring process died"
    return f"the measuring process died with exit status {exitcode}"


def _resolve(target: str) -> Any:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _serve(conn: Connection, factory: str | Callable[..., Any], args: tuple,
           env: dict[str, str | None], inherited: Connection | None = None) -> None:
    if inherited is not None:  # a forked child's copy of the parent's end: the parent's
        inherited.close()  # death must read as the end of the pipe here
    adopt_environment(env)
    try:
        runner = (_resolve(factory) if isinstance(factory, str) else factory)(*args)
    except BaseException as e:  # noqa: BLE001 - report anything, the parent decides
        # the error first: a trial's status is the first line of what the parent raises
        conn.send(("setup-error", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}"))
        return
    conn.send(("ready", None))
    healthy = getattr(runner, "healthy", None)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if message is None:
            return
        kind, config = message
        try:
            conn.send(("ok", getattr(runner, kind)(Config.from_dict(config))))
        except BaseException as e:  # noqa: BLE001
            if healthy is not None and not healthy():
                conn.send(("dead", f"{type(e).__name__}: {e}"))
                return  # the parent starts another process for the next trial
            # a TrialFailed (wrong numbers) says why already; others say what they are
            conn.send(("error", str(e) if isinstance(e, TrialFailed) else
                       f"{type(e).__name__}: {e}"))


class Isolated:
    """`measure(config)` in a child process, with a per-trial timeout in seconds.

    `factory` is a `module:function` the child imports, or, with `start="fork"`, any callable
    (the forked child has it already). `limit` (seconds) cuts one call shorter than `timeout`:
    the tune's deadline, which then raises `OutOfTime`."""

    def __init__(self, factory: str | Callable[..., Any], args: tuple = (),
                 timeout: float = 60.0, start: str = "spawn") -> None:
        if start != "fork" and not isinstance(factory, str):
            raise TypeError("a spawned child imports its factory: give it as 'module:function'")
        self.factory = factory
        self.args = args
        self.timeout = timeout
        self.ctx = mp.get_context(start)
        self.forked = start == "fork"
        self.proc: Any = None
        self.conn: Connection | None = None
        self.restarts = 0
        self.broken: str | None = None  # why the factory failed (every later trial fails so)

    def _start(self, limit: float | None = None) -> None:
        parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(
            target=_serve, daemon=True,
            args=(child, self.factory, self.args, cache_environment(),
                  parent if self.forked else None))
        self.proc.start()
        child.close()  # the child's end lives in the child only: its death closes the pipe
        self.conn = parent
        seconds = max(self.timeout, 120.0)  # imports and a CUDA context, not the trial's
        if not wait([parent, self.proc.sentinel], seconds if limit is None else
                    min(seconds, max(0.0, limit))):
            self._kill()
            if limit is not None and limit < seconds:
                raise OutOfTime(f"{STOPPED} while the measuring process started: the "
                                "tune's timeout ran out")
            raise TrialFailed("the measuring process did not start")
        try:
            status, detail = parent.recv()
        except (EOFError, OSError):
            why = self._kill()
            raise TrialFailed(f"{why} while setting up") from None
        if status != "ready":
            self.close()
            self.broken = f"the measuring process failed to set up: {detail}"
            raise TrialFailed(self.broken)

    def start(self, limit: float | None = None) -> None:
        """Start the child now (it starts at the first trial otherwise), waiting at most
        `limit` seconds for it to set up."""
        if self.broken is None and (self.proc is None or not self.proc.is_alive()):
            self.close()
            self._start(limit)

    def measure(self, config: Config, limit: float | None = None) -> float:
        """The runner's `measure(config)` in the child."""
        return self._ask("measure", config, limit)

    def time(self, config: Config, limit: float | None = None) -> float:
        """The runner's `time(config)` in the child."""
        return self._ask("time", config, limit)

    def _ask(self, kind: str, config: Config, limit: float | None = None) -> float:
        if self.broken is not None:
            raise TrialFailed(self.broken)
        if limit is not None and limit <= 0:
            raise OutOfTime(f"{STOPPED} before it started: the tune's timeout ran out")
        began = monotonic()
        self.start(limit)
        assert self.conn is not None
        if limit is not None:
            limit -= monotonic() - began
        seconds = self.timeout if limit is None else max(0.0, min(self.timeout, limit))
        try:
            self.conn.send((kind, config.to_dict()))
            answered = self.conn.poll(seconds) or None
        except (EOFError, OSError):
            answered = False  # the child is gone already
        if answered is None:  # no answer in time: the child is stopped
            self._kill()
            self.restarts += 1
            if seconds < self.timeout:
                raise OutOfTime(f"{STOPPED} after {seconds:.3g} s: the tune's timeout ran out")
            raise TrialFailed(f"timed out after {self.timeout:g} s")
        status, value = None, None
        if answered:
            try:
                status, value = self.conn.recv()
            except (EOFError, OSError):  # it died before answering
                pass
        if status is None:
            why = self._kill()
            self.restarts += 1
            raise TrialFailed(why)
        if status == "dead":
            self.close()
            self.restarts += 1
            first, _, rest = str(value).partition("\n")
            why = f"{first} (the measuring process cannot go on after it and was replaced)"
            raise TrialFailed(why + (f"\n{rest}" if rest else ""))
        if status != "ok":
            raise TrialFailed(str(value))
        return float(value)

    def _kill(self) -> str:
        """Stop the child at once (it hung or died); why it ended, in words."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self.proc is None:
            return died(None)
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()
        why = died(self.proc.exitcode)
        self.proc = None
        return why

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.send(None)
            except (OSError, BrokenPipeError):
                pass
            self.conn.close()
            self.conn = None
        if self.proc is not None:
            self.proc.join(timeout=1.0)
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join()
            self.proc = None

    def __del__(self) -> None:
        self.close()
