"""The dataflow config's JSON Schema (shipped in the package) and validation against it."""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any

from lowering.backends.spatial.arch import Arch
from tiledsl.errors import BackendError


@cache
def schema() -> dict[str, Any]:
    text = files("lowering.backends.spatial").joinpath("dataflow.schema.json").read_text()
    return json.loads(text)


def validate(config: dict[str, Any]) -> None:
    """Raise BackendError naming the first place where `config` breaks the schema (checked
    against its form, one config or a sequence of phases, so the message names the place)."""
    from tiledsl.schema_check import first_violation

    form = "sequence" if isinstance(config, dict) and "phases" in config else "config"
    branch = {k: v for k, v in schema().items() if k != "oneOf"}
    violation = first_violation({**branch, "$ref": f"#/$defs/{form}"}, config)
    if violation:
        raise BackendError(f"dataflow config does not match its schema {violation}")


def check(config: Any, arch: Arch) -> None:
    """Raise BackendError naming what makes `config` (one phase's dataflow config, e.g. read
    from a file or edited by hand) unfit to simulate on `arch`: a schema violation, another
    architecture, or a reference to a semaphore, route, link or DRAM channel it does not have."""
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
    for agent in config["agents"]:
        _check_steps(agent["program"], agent["id"], sems, routes)


def _unique(items: list[dict[str, Any]], what: str) -> set[str]:
    ids: set[str] = set()
    for item in items:
        if item["id"] in ids:
            raise BackendError(f"dataflow config: {what} id {item['id']!r} is defined twice")
        ids.add(item["id"])
    return ids


def _check_steps(steps: list[dict[str, Any]], agent: str, sems: set[str],
                 routes: set[str]) -> None:
    for step in steps:
        for verb in ("acquire", "release"):
            if verb in step and step[verb] not in sems:
                raise BackendError(f"dataflow config: agent {agent!r} {verb}s semaphore "
                                   f"{step[verb]!r}, which is not defined")
        if "copy" in step and step["copy"]["route"] not in routes:
            raise BackendError(f"dataflow config: agent {agent!r} copies over route "
                               f"{step['copy']['route']!r}, which is not defined")
        if "loop" in step:
            _check_steps(step["body"], agent, sems, routes)
