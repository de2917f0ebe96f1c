"""Running measurements in a separate process, so a hang, a crash or an illegal memory access
fails one trial and never the tuner.

The child builds its runner once from a `module:function` factory (so it can import the user's
kernel file and, on a GPU, create its CUDA context once), then answers configs one by one:
`measure` (a candidate: checked, then timed) or `time` (a finalist, timed again). A config that
times out or kills the child is reported as failed and the child is restarted. So is one that
raised and left the runner unusable (its `healthy()` is False: on a GPU, a sticky CUDA error
such as an illegal memory access fails every later call in that process). A factory that fails
fails every later trial with its error, without starting the child again.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import traceback
from multiprocessing.connection import Connection
from typing import Any

from tiledsl.config import Config


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


def _resolve(target: str) -> Any:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _serve(conn: Connection, factory: str, args: tuple, env: dict[str, str | None]) -> None:
    adopt_environment(env)
    try:
        runner = _resolve(factory)(*args)
    except BaseException as e:  # noqa: BLE001 - report anything, the parent decides
        # the error first: a trial's status is the first line of what the parent raises
        conn.send(("setup-error", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}"))
        return
    conn.send(("ready", None))
    healthy = getattr(runner, "healthy", None)
    while True:
        message = conn.recv()
        if message is None:
            return
        kind, config = message
        try:
            conn.send(("ok", getattr(runner, kind)(Config.from_dict(config))))
        except BaseException as e:  # noqa: BLE001
            if healthy is not None and not healthy():
                conn.send(("dead", f"{type(e).__name__}: {e}"))
                return  # the parent starts another process for the next trial
            conn.send(("error", f"{type(e).__name__}: {e}"))


class Isolated:
    """`measure(config)` in a child process, with a per-trial timeout in seconds."""

    def __init__(self, factory: str, args: tuple = (), timeout: float = 60.0) -> None:
        self.factory = factory
        self.args = args
        self.timeout = timeout
        self.ctx = mp.get_context("spawn")
        self.proc: Any = None
        self.conn: Connection | None = None
        self.restarts = 0
        self.broken: str | None = None  # why the factory failed (every later trial fails so)

    def _start(self) -> None:
        parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_serve, daemon=True,
                                     args=(child, self.factory, self.args, cache_environment()))
        self.proc.start()
        self.conn = parent
        if not parent.poll(max(self.timeout, 120.0)):
            self.close()
            raise TrialFailed("the measuring process did not start")
        try:
            status, detail = parent.recv()
        except (EOFError, OSError):
            self.close()
            raise TrialFailed("the measuring process died while setting up") from None
        if status != "ready":
            self.close()
            self.broken = f"the measuring process failed to set up: {detail}"
            raise TrialFailed(self.broken)

    def measure(self, config: Config) -> float:
        """The runner's `measure(config)` in the child."""
        return self._ask("measure", config)

    def time(self, config: Config) -> float:
        """The runner's `time(config)` in the child."""
        return self._ask("time", config)

    def _ask(self, kind: str, config: Config) -> float:
        if self.broken is not None:
            raise TrialFailed(self.broken)
        if self.proc is None or not self.proc.is_alive():
            self.close()
            self._start()
        assert self.conn is not None
        try:
            self.conn.send((kind, config.to_dict()))
            ready = self.conn.poll(self.timeout)
        except (EOFError, OSError):
            ready = False
        if not ready:
            alive = self.proc.is_alive()
            self.close()
            self.restarts += 1
            raise TrialFailed(f"timed out after {self.timeout:g} s" if alive else
                              "the measuring process died (crash or illegal memory access)")
        try:
            status, value = self.conn.recv()
        except (EOFError, OSError):
            self.close()
            self.restarts += 1
            raise TrialFailed("the measuring process died (crash or illegal memory access)") from None
        if status == "dead":
            self.close()
            self.restarts += 1
            first, _, rest = str(value).partition("\n")
            why = f"{first} (the measuring process cannot go on after it and was replaced)"
            raise TrialFailed(why + (f"\n{rest}" if rest else ""))
        if status != "ok":
            raise TrialFailed(str(value))
        return float(value)

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
