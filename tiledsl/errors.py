"""tiledsl's exception hierarchy: every error names the kernel and, when tracing, the user's line."""

from __future__ import annotations

import linecache
import os
import sys
from dataclasses import dataclass

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PACKAGE_DIRS = tuple(os.path.join(_ROOT, pkg) + os.sep for pkg in ("tiledsl", "lowering", "autotune"))


@dataclass(frozen=True)
class Loc:
    """A source location in the user's file."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    def source_line(self) -> str:
        return linecache.getline(self.file, self.line).strip()


def is_internal(filename: str) -> bool:
    """True for frames inside tiledsl itself (and generated helper code), or inside torch's
    Python code, through which a kernel's `torch.nn.functional.relu(v)` reaches tiledsl."""
    path = os.path.abspath(filename)
    return path.startswith(_PACKAGE_DIRS + _torch_dir()) or filename.startswith("<")


def _torch_dir() -> tuple[str, ...]:
    """torch's package directory, once torch is imported (tiledsl never imports it for this)."""
    global _TORCH_DIR
    if _TORCH_DIR is None:
        torch = sys.modules.get("torch")
        file = getattr(torch, "__file__", None) if torch is not None else None
        if file is None:
            return ()
        _TORCH_DIR = (os.path.dirname(os.path.abspath(file)) + os.sep,)
    return _TORCH_DIR


_TORCH_DIR: tuple[str, ...] | None = None


def user_loc(depth: int = 1) -> Loc | None:
    """The innermost caller frame outside tiledsl: the user's line that triggered an op."""
    frame = sys._getframe(depth)
    while frame is not None:
        name = frame.f_code.co_filename
        if not is_internal(name):
            return Loc(name, frame.f_lineno)
        frame = frame.f_back
    return None


class TileDSLError(Exception):
    """Root of every error tiledsl raises on purpose."""

    def __init__(self, message: str, *, kernel: str | None = None, loc: Loc | None = None,
                 hint: str | None = None) -> None:
        self.message = message
        self.kernel = kernel
        self.loc = loc
        self.hint = hint
        super().__init__(self._format())

    def _format(self) -> str:
        head = ""
        if self.loc is not None:
            head += f"{self.loc}: "
        if self.kernel is not None:
            head += f"in kernel '{self.kernel}': "
        text = head + self.message
        if self.loc is not None:
            line = self.loc.source_line()
            if line:
                text += f"\n    {line}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text

    def with_context(self, *, kernel: str | None = None, loc: Loc | None = None) -> TileDSLError:
        """Fill in the kernel name / location if they are not set yet (re-formats the message)."""
        if (kernel is None or self.kernel is not None) and (loc is None or self.loc is not None):
            return self
        self.kernel = self.kernel or kernel
        self.loc = self.loc or loc
        self.args = (self._format(),)
        return self


    def with_note(self, note: str) -> TileDSLError:
        """The error with `note` added to its hint (re-formats the message)."""
        self.hint = f"{self.hint}; {note}" if self.hint else note
        self.args = (self._format(),)
        return self


class TraceError(TileDSLError):
    """The kernel body does something the DSL does not allow."""


# the Python exceptions a kernel's host code raises on purpose (a wrapper's own check,
# `raise RuntimeError("feature dim >= 64KB")`): the TraceError that reports one is one of them
# too, so the caller's `except RuntimeError` still catches it (`raised_as`)
_ON_PURPOSE = (RuntimeError, ValueError, NotImplementedError, AssertionError, KeyError,
               IndexError, TypeError)
_AS: dict[type, type] = {}


def raised_as(e: BaseException) -> type[TraceError]:
    """The TraceError class that reports `e`, an exception a `raise` statement of the user's
    code raised while tracing: a subclass of TraceError and of `type(e)` where that is one of
    Python's own (`_ON_PURPOSE`, or a subclass of one), else TraceError."""
    kind = type(e)
    if not issubclass(kind, _ON_PURPOSE) or kind.__module__ != "builtins":
        return TraceError
    return _raised_class(kind)


def _raised_class(kind: type) -> type[TraceError]:
    if kind not in _AS:
        _AS[kind] = type("TraceError", (TraceError, kind), {
            "__doc__": f"A {kind.__name__} the kernel's code raised, reported by tiledsl.",
            "__module__": __name__, "__qualname__": f"TraceError[{kind.__name__}]",
            "__reduce__": lambda self: (_raised_again, (
                kind, self.message, self.kernel, self.loc, self.hint))})
    return _AS[kind]


def _raised_again(kind: type, message: str, kernel: str | None, loc: Loc | None,
                  hint: str | None) -> TraceError:
    """A `raised_as` error made again where it is unpickled (an autotuning worker's)."""
    return _raised_class(kind)(message, kernel=kernel, loc=loc, hint=hint)


class ShapeError(TraceError, ValueError):
    """Shapes do not line up: `@`, stores, broadcasting, a tile on the wrong dimension."""


class DTypeError(TraceError, TypeError):
    """Element types clash or an op does not accept a dtype."""


class ControlFlowError(TraceError):
    """Python control flow on a traced tile value (use td.where)."""


class ArgumentError(TileDSLError, TypeError):
    """A kernel was called with arguments it cannot take."""


class OutOfBoundsError(TileDSLError, IndexError):
    """A scalar index (a runtime argument, or arithmetic on grid indices) falls outside its
    tensor's dimension. The NumPy and spatial backends check every access; compiled Triton code
    masks it (reads are undefined, writes are dropped), as Triton and CUDA do."""


class DeviceAssertionError(TileDSLError, AssertionError):
    """A `td.device_assert` (or an `assert` on a tile value) found a lane in range where its
    condition is false. The NumPy and spatial backends check every one; compiled Triton code
    checks them as Triton's `tl.device_assert` does: only when compiled with TRITON_DEBUG=1."""


class RaceError(TileDSLError, RuntimeError):
    """Equal indices of a scatter (an index tile's lanes, or two programs') write different
    values to one element: no GPU defines which write wins. The NumPy and spatial backends check
    every scatter; compiled Triton code keeps one of the writes."""


class ConfigError(TileDSLError, ValueError):
    """A config does not fit the kernel's config space."""


class IRError(TileDSLError):
    """The tile IR is malformed (verifier) or its text does not parse."""


class BackendError(TileDSLError):
    """A backend is missing, unavailable on this machine, or cannot run the kernel."""


class TileDSLWarning(UserWarning):
    """Something tiledsl worked around and the user should know of (e.g. stored trials it
    could not trust)."""


def warn(message: str) -> None:
    """Warn at the user's line: the innermost caller frame outside tiledsl."""
    import warnings
    level, frame = 2, sys._getframe(1)  # stacklevel 2: warn's caller
    while frame is not None and is_internal(frame.f_code.co_filename):
        level, frame = level + 1, frame.f_back
    warnings.warn(message, TileDSLWarning, stacklevel=level)
