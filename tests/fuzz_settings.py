"""Hypothesis settings shared by the fuzzers (tests/frontend/test_fuzz_kernels.py, tests/frontend/test_fuzz_api.py).

The default run is short and derandomized, so CI draws the same examples every time. Set
TILEDSL_FUZZ_EXAMPLES=N for a longer local run: N examples per fuzz test, drawn at random (a
new search each run; a failure prints the `@reproduce_failure` blob that replays it). A failing
example is not shrunk (each step of a kernel fuzzer's shrink traces and runs a new kernel, and
Hypothesis gives up after five minutes): set TILEDSL_FUZZ_SHRINK=1 to shrink it.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

LONG = int(os.environ.get("TILEDSL_FUZZ_EXAMPLES", "0") or 0)
SHRINK = os.environ.get("TILEDSL_FUZZ_SHRINK", "") not in ("", "0")


def fuzz_settings(default_examples: int) -> settings:
    """`default_examples` in CI (derandomized); TILEDSL_FUZZ_EXAMPLES of them, random, when set."""
    return settings(
        max_examples=LONG or default_examples,
        deadline=None,
        derandomize=not LONG,
        print_blob=bool(LONG),
        database=None,
        phases=[Phase.explicit, Phase.generate, *([Phase.shrink] if SHRINK else [])],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                               HealthCheck.data_too_large],
    )
