"""Where backends and the lowering pipeline plug in. The frontend never imports them directly.

Plugins are the modules listed under the `tiledsl.plugins` entry point group (pyproject.toml);
importing one runs its `register_*` calls. A new backend touches its own folder plus one line.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Callable, Protocol

from tiledsl.errors import BackendError

if TYPE_CHECKING:
    from tiledsl.runtime.config import Config, ConfigSpace
    from tiledsl.ir.core import Function


class Backend(Protocol):
    """What a backend provides: knobs for the config space and a way to run lowered IR."""

    name: str

    def extend_space(self, space: ConfigSpace, fn: Function, **options: Any) -> ConfigSpace: ...

    def run(self, fn: Function, args: list[Any], config: Config, **options: Any) -> list[Any]: ...


Pipeline = Callable[["Function"], "Function"]

_backends: dict[str, Backend] = {}
_targets: dict[str, tuple[Callable[..., str], str]] = {}
_pipeline: list[Pipeline] = []
_commands: dict[str, Callable[[Any], None]] = {}  # CLI subcommands plugins add
_services: dict[str, Any] = {}  # e.g. "tuner": what k.autotune calls
_loaded = False


def register_backend(backend: Backend) -> Backend:
    _backends[backend.name] = backend
    return backend


def register_target(name: str, backend: str) -> Callable[[Callable[..., str]], Callable[..., str]]:
    """Register `fn(lowered_ir, config, args) -> str` as `k.source(target=name)`; configs come
    from `backend`'s config space."""
    def deco(fn: Callable[..., str]) -> Callable[..., str]:
        _targets[name] = (fn, backend)
        return fn
    return deco


def register_pipeline(fn: Pipeline) -> Pipeline:
    _pipeline[:] = [fn]
    return fn


def register_command(name: str, add: Callable[[Any], None]) -> None:
    """`add(subparsers)` adds the `tiledsl NAME` subcommand (the plugin owns its code)."""
    _commands[name] = add


def commands() -> dict[str, Callable[[Any], None]]:
    load_plugins()
    return dict(_commands)


def register_service(name: str, service: Any) -> Any:
    _services[name] = service
    return service


def service(name: str) -> Any:
    load_plugins()
    if name not in _services:
        raise BackendError(f"no {name} installed (is tiledsl installed? pip install -e .)")
    return _services[name]


def load_plugins() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for ep in entry_points(group="tiledsl.plugins"):
        ep.load()


def backend(name: str) -> Backend:
    load_plugins()
    if not isinstance(name, str) or name not in _backends:
        raise BackendError(f"no backend named {name!r}; available: {sorted(_backends)}"
                           + ("" if _backends else " (is tiledsl installed? pip install -e .)"))
    return _backends[name]


def target(name: str) -> tuple[Callable[..., str], str]:
    """The emitter of source target `name` and the backend whose configs it takes."""
    load_plugins()
    if not isinstance(name, str) or name not in _targets:
        known = sorted(_targets) + ["ir", "ir-traced"]
        raise BackendError(f"no source target named {name!r}; available: {sorted(known)}")
    return _targets[name]


def pipeline() -> Pipeline:
    load_plugins()
    if not _pipeline:
        raise BackendError("no lowering pipeline registered (is tiledsl installed? pip install -e .)")
    return _pipeline[0]
