"""The dataflow config's JSON Schema (shipped in the package) and validation against it."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Any

from lowering.backends.spatial.arch import Arch
from lowering.backends.spatial.bounds import check_bounds, check_copy
from tiledsl.errors import BackendError


@cache
def schema() -> dict[str, Any]:
    text = files("lowering.backends.spatial").joinpath("dataflow.schema.json").read_text()
    return json.loads(text)


def _form(form: str) -> dict[str, Any]:
    """The schema of one form of config ("config": one phase, "sequence": several) or of a
    part of one ("step")."""
    branch = {k: v for k, v in schema().items() if k != "oneOf"}
    return {**branch, "$ref": f"#/$defs/{form}"}


@cache
def _conforms(form: str) -> Callable[[Any], bool]:
    from tiledsl.interop.schema_fast import compile_schema
    return compile_schema(_form(form))


def validate(config: dict[str, Any]) -> None:
    """Raise BackendError naming the first place where `config` breaks the schema (checked
    against its form, one config or a sequence of phases, so the message names the place).
    The schema is compiled once (a config has tens of thousands of steps); a config that breaks
    it is narrowed to the part that does before `jsonschema` words the message."""
    form = "sequence" if isinstance(config, dict) and "phases" in config else "config"
    if _conforms(form)(config):
        return
    violation = _violation(form, config)
    if violation:
        raise BackendError(f"dataflow config does not match its schema {violation}")


def _violation(form: str, config: Any) -> str | None:
    """`first_violation` of a config found not to conform: on the config with its programs
    emptied where that breaks the schema too, else on the first step that breaks it."""
    from tiledsl.interop.schema_check import first_violation

    agents = config.get("agents") if form == "config" else None
    if not isinstance(agents, list):
        return first_violation(_form(form), config)
    bare = [dict(a, program=[]) if isinstance(a, dict) and isinstance(a.get("program"), list)
            else a for a in agents]
    if not _conforms(form)(dict(config, agents=bare)):
        return first_violation(_form(form), dict(config, agents=bare))
    for i, agent in enumerate(agents):
        for j, step in enumerate(agent["program"]):
            if not _conforms("step")(step):
                where = first_violation(_form("step"), step)
                if where:  # "at PATH: MESSAGE", PATH within the step
                    path, message = where[3:].split(": ", 1)
                    inner = "" if path == "<root>" else f"/{path}"
                    return f"at agents/{i}/program/{j}{inner}: {message}"
    return first_violation(_form(form), config)


def check(config: Any, arch: Arch) -> None:
    """Raise BackendError naming what makes `config` (one phase's dataflow config, e.g. read
    from a file or edited by hand) unfit to simulate on `arch`: a schema violation, another
    architecture, a reference to a semaphore, route, link, buffer, tensor or DRAM channel it
    does not have, or a number the architecture cannot hold (`bounds.py`)."""
    if not isinstance(config, dict):
        raise BackendError(f"a dataflow config must be a dict (parsed JSON), got "
                           f"{type(config).__name__}")
    try:
        validate(config)
    except RecursionError:
        raise BackendError("dataflow config: its loops are nested too deeply") from None
    if "phases" in config:
        count = len(config["phases"])
        raise BackendError(f"the dataflow config has {count} phase{'' if count == 1 else 's'}: "
                           "run each of phases(config) in order")
    if config["arch"] != arch.name or config["timing"] != arch.timing:
        raise BackendError(f"the dataflow config was mapped for {config['arch']!r} "
                           f"({config['timing']} timing), not for {arch.name!r} "
                           f"({arch.timing} timing)")
    sems = _unique(config["semaphores"], "semaphore")
    routes = _unique(config["routes"], "route")
    _unique(config["agents"], "agent")
    _unique(config["tensors"], "tensor", key="name")
    _unique(config["buffers"], "buffer")
    names = _Names(sems, routes, {b["id"]: b for b in config["buffers"]},
                   {t["name"] for t in config["tensors"]})
    for i, link in enumerate(config["links"]):
        if link["id"] != i:
            raise BackendError(f"dataflow config: link {i} has id {link['id']}: links must be "
                               "numbered 0, 1, 2, ... in order")
    channels = {d.name for d in arch.dram}
    for route in config["routes"]:
        for link in route["links"]:
            if link >= len(config["links"]):
                raise BackendError(f"dataflow config: route {route['id']!r} uses link {link}; "
                                   f"the config has {len(config['links'])} links")
        for end in [route["src"], *route["dst"]]:
            if "dram" in end and end["dram"] not in channels:
                raise BackendError(f"dataflow config: route {route['id']!r} starts or ends at "
                                   f"DRAM channel {end['dram']!r}, which {arch.name} does not "
                                   "have")
    check_bounds(config, arch)
    for i, agent in enumerate(config["agents"]):
        _check_steps(agent["program"], f"agents/{i}/program", agent["id"], names)


def _unique(items: list[dict[str, Any]], what: str, key: str = "id") -> set[str]:
    ids: set[str] = set()
    for item in items:
        if item[key] in ids:
            raise BackendError(f"dataflow config: {what} {key} {item[key]!r} is defined twice")
        ids.add(item[key])
    return ids


@dataclass(frozen=True)
class _Names:
    """What a step may refer to: semaphores, routes, buffers (by id) and tensors."""

    sems: set[str]
    routes: set[str]
    buffers: dict[str, dict[str, Any]]
    tensors: set[str]


def _check_steps(steps: list[dict[str, Any]], field: str, agent: str, names: _Names) -> None:
    for i, step in enumerate(steps):
        for verb in ("acquire", "release"):
            if verb in step and step[verb] not in names.sems:
                raise BackendError(f"dataflow config: agent {agent!r} {verb}s semaphore "
                                   f"{step[verb]!r}, which is not defined")
        if "copy" in step:
            _check_copy(f"{field}/{i}/copy", step["copy"], agent, names)
        if "loop" in step:
            _check_steps(step["body"], f"{field}/{i}/body", agent, names)


def _check_copy(field: str, copy: dict[str, Any], agent: str, names: _Names) -> None:
    if copy["route"] not in names.routes:
        raise BackendError(f"dataflow config: agent {agent!r} copies over route "
                           f"{copy['route']!r}, which is not defined")
    for side in ("src", "dst"):
        end = copy[side]
        refs = [("tensor", end["tensor"])] if "tensor" in end else \
            [("buffer", b) for b in end.get("buffers", [end.get("buffer")])]
        for what, name in refs:
            if name not in (names.tensors if what == "tensor" else names.buffers):
                raise BackendError(f"dataflow config: {field}/{side}: agent {agent!r} copies "
                                   f"{'from' if side == 'src' else 'to'} {what} {name!r}, "
                                   "which is not defined")
    check_copy(field, copy, names.buffers)
