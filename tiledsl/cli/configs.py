"""Which configs a `tiledsl` subcommand runs a kernel with, and what it calls each one.

A config is `--config` (given as JSON), `tuned` (the result cache's best for these inputs on
this backend, as `k(*args)` and `k.run` use it), `default` (the space's default) or `sampled`
(drawn from the space with --seed). Where one config is several of these, its label joins them
(`tuned/default`).
"""

from __future__ import annotations

import json
from typing import Any

from tiledsl.runtime import registry
from tiledsl.runtime.config import Config, ConfigSpace
from tiledsl.errors import TileDSLError
from tiledsl.runtime.kernel import TileKernel


def given_config(text: str, space: ConfigSpace) -> Config:
    """`--config`'s JSON as a config of `space` (validated: a ConfigError names the kernel)."""
    from tiledsl.cli.inputs import CLIError
    try:
        config = Config.from_dict(json.loads(text))
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise CLIError(f"--config takes a config as JSON, e.g. "
                       f"'{json.dumps(space.default().to_dict())}': {e}") from None
    return space.validate(config)


def tuned_config(k: TileKernel, args: tuple, backend: str, space: ConfigSpace,
                 arch: Any = None) -> Config | None:
    """The result cache's tuned config for these inputs on `backend` (and spatial `arch`), if
    it holds one that is in `space`."""
    try:
        found = registry.service("tuner").cached_config(k, list(args), backend, arch)
    except TileDSLError:  # no tuner installed
        return None
    return found if found is not None and found in space else None


def labelled(k: TileKernel, args: tuple, space: ConfigSpace, backend: str, given: str | None,
             arch: Any = None) -> list[tuple[str, Config]]:
    """(label, config) for --config, the tuned config and the default, each config once."""
    found = [("--config", given_config(given, space))] if given else []
    tuned = tuned_config(k, args, backend, space, arch)
    found += [("tuned", tuned)] if tuned is not None else []
    found.append(("default", space.default()))
    out: list[tuple[str, Config]] = []
    for label, config in found:
        same = next((i for i, (_, c) in enumerate(out) if c == config), None)
        if same is None:
            out.append((label, config))
        else:
            out[same] = (f"{out[same][0]}/{label}", config)
    return out


def chosen(k: TileKernel, args: tuple, space: ConfigSpace, backend: str, given: str | None,
           arch: Any = None) -> tuple[str, Config]:
    """The one config to use: --config, else the tuned one, else the default."""
    return labelled(k, args, space, backend, given, arch)[0]


def with_samples(fixed: list[tuple[str, Config]], space: ConfigSpace, backend: str,
                 samples: int, seed: int) -> tuple[list[tuple[str, Config]], str | None]:
    """`fixed` and then `samples` other configs drawn with `seed`; and a note when the space
    has fewer other configs than asked for."""
    seen = [c for _, c in fixed]
    drawn = [c for c in space.sample(samples + len(seen), seed=seed) if c not in seen][:samples]
    note = None
    if space.countable and len(drawn) < samples:
        note = (f"--samples {samples}: the {backend} config space has "
                f"{len(space)} configs, only {len(space) - len(seen)} besides "
                f"the {' and '.join(label for label, _ in fixed)} (all of them ran)")
    return fixed + [("sampled", c) for c in drawn], note
