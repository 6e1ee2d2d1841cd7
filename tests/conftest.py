"""Hypothesis settings profiles of the suite.

`properties`: the tests marked `properties` at full strength, as `.ci/run` runs them
(`pytest -m properties --hypothesis-profile=properties`): 2,000 examples each, derandomized
(the same examples on every run, so a CI failure replays locally with the same command) and
with the failing example's blob printed (`@reproduce_failure`). Without it, the normal run
gives those tests a quick pass of a few dozen random examples.

A profile must be registered before pytest's configuration loads it, hence this file.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile(
    "properties",
    max_examples=2000,
    derandomize=True,
    database=None,
    print_blob=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
