"""Hypothesis settings profiles of the suite, and the logging configuration kept per test.

`fuzz`: the fuzz targets (tests/core/hostile, marker `fuzz`) run long with random examples, as
`docs/testing.md` gives the command: 100,000 examples each (`CLUSTERSCALER_FUZZ_EXAMPLES`
sets another count), the failing example's blob printed (the targets set their own deadline
per example, `fuzzkit.fuzz_settings`).

`properties`: the tests marked `properties` at full strength, as `.ci/run` runs them
(`pytest -m properties --hypothesis-profile=properties`): 2,000 examples each, derandomized
(the same examples on every run, so a CI failure replays locally with the same command) and
with the failing example's blob printed (`@reproduce_failure`). Without it, the normal run
gives those tests a quick pass of a few dozen random examples.

A profile must be registered before pytest's configuration loads it, hence this file.

With `-n` (pytest-xdist, as README.md and `.ci/run` run the suite: `-n auto --dist loadgroup`)
the tests on the real control plane share one xdist group, so they run one after another in
one worker that starts the control plane once, while the other workers take the rest.
"""

from __future__ import annotations

import os
import threading

import pytest
import structlog
from hypothesis import HealthCheck, settings

# Every run of the suite draws the same examples (a CI run is reproducible, and a failure
# replays with the same command); the `properties` profile draws many more.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.load_profile("ci")

settings.register_profile(
    "properties",
    max_examples=2000,
    derandomize=True,
    database=None,
    print_blob=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

settings.register_profile(
    "fuzz",
    max_examples=int(os.environ.get("CLUSTERSCALER_FUZZ_EXAMPLES", "100000")),
    derandomize=False,
    database=None,
    print_blob=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


# The fixtures of the real control plane (clusterscaler.testing.realcluster and
# tests/realcluster/conftest.py): a test that uses one runs in the `control-plane` group.
CONTROL_PLANE_FIXTURES = frozenset({"real_cluster", "kwok_cluster", "kwok_env"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if CONTROL_PLANE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.xdist_group("control-plane"))


@pytest.fixture(autouse=True)
def _structlog_configuration_restored():  # type: ignore[no-untyped-def]
    """Each test starts with the logging configuration the one before it found: a test that
    runs the CLI in-process configures structlog (`--v`, a level filter), which would
    otherwise hide the info events a later test captures with `capture_logs`."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


@pytest.fixture(autouse=True)
def _no_event_writer_left_running(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """A test leaves no event writer (`BackgroundEventSink`'s worker) running: one left
    behind retries its writes for minutes against a server the test stopped, and its log
    lines land in whatever a later test in the same worker captures."""
    before = set(threading.enumerate())
    yield
    left = [
        t for t in threading.enumerate()
        if t.name == "events" and t not in before and t.is_alive()
    ]  # fmt: skip
    if left:
        pytest.fail(
            f"{request.node.nodeid} left {len(left)} event writer(s) running: stop the "
            "KubeRuntime (or close the BackgroundEventSink) it started",
            pytrace=False,
        )
