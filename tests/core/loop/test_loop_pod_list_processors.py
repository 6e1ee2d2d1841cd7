"""Pod-list processors in the loop: a third party's, registered through a registry like any
plugin, and the order in which the loop runs them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest
from clusterscaler.api import (
    AutoscalingOptions,
    Pod,
    PodListContext,
    PodListProcessor,
    PodListProcessorFactory,
    hookimpl,
)
from clusterscaler.framework.pluginmanager import PluginHost, collect_registry
from clusterscaler.interfaces.registry import DuplicateNameError, PluginSource, Registry
from clusterscaler.loop.podlists import build_pod_list_processors, process_pod_list
from clusterscaler.simulator.builders import make_pod
from clusterscaler.testing.loopharness import LoopHarness

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "plugins.md"


def guide_sample() -> ModuleType:
    """The example processor of docs/plugins.md, as a plugin module."""
    text = GUIDE.read_text()
    section = text.split("### `clusterscaler_register_pod_list_processors(registry)`")[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    module = ModuleType("clusterscaler_skip_batch")
    exec(compile(code.group(1), str(GUIDE), "exec"), module.__dict__)
    return module


def with_plugin(host: PluginHost, plugin: object, distribution: str) -> Registry:
    host.register(plugin, distribution, PluginSource(distribution, distribution, "1.0"))
    host.manager.check_pending()
    return collect_registry(host)


def grown_by(registry: Registry) -> list[int]:
    harness = LoopHarness(registry)
    pool = harness.cloud.add_group("pool", max_size=5, cpu="2", memory="8Gi")
    harness.add_pod("web", cpu="1500m", memory="1Gi")
    harness.add_pod("nightly", cpu="1500m", memory="1Gi", namespace="batch")
    result = harness.run_once()
    assert ("batch/nightly" in result.pending_pods) == (pool.increases == [2])
    return pool.increases


def test_a_third_party_processor_keeps_a_pending_pod_out_of_scale_up(
    installed_plugins: tuple[PluginHost, Registry],
) -> None:
    host, standard = installed_plugins
    assert grown_by(standard) == [2]
    registry = with_plugin(host, guide_sample(), "clusterscaler-skip-batch")
    entry = registry.pod_list_processors["skip-batch"]
    assert entry.source.distribution == "clusterscaler-skip-batch"
    assert grown_by(registry) == [1]


def test_a_name_registered_twice_names_both_distributions(
    installed_plugins: tuple[PluginHost, Registry],
) -> None:
    host, _ = installed_plugins

    class Again:
        @hookimpl
        def clusterscaler_register_pod_list_processors(self, registry: Registry) -> None:
            registry.add_pod_list_processor("capacity-buffers", keep("capacity-buffers", 0))

    with pytest.raises(DuplicateNameError, match=r"by both clusterscaler .*and clusterscaler-again"):
        with_plugin(host, Again(), "clusterscaler-again")


class Keep:
    """Drops nothing, adds one pod named after itself (to see the order)."""

    def __init__(self, name: str, order: int) -> None:
        self.name = name
        self.order = order

    def process(self, pods: Sequence[Pod], context: PodListContext) -> list[Pod]:
        return [*pods, make_pod(self.name, "0", "0", unschedulable=True)]


def keep(name: str, order: int) -> PodListProcessorFactory:
    def factory(options: AutoscalingOptions) -> PodListProcessor:
        return Keep(name, order)

    return factory


def test_processors_run_by_order_then_name_whatever_the_registration_order() -> None:
    registry = Registry()
    for name, order in (("zeta", 10), ("late", 300), ("alpha", 10), ("first", 5)):
        registry.add_pod_list_processor(name, keep(name, order))
    processors = build_pod_list_processors(registry, AutoscalingOptions())
    assert [p.name for p in processors] == ["first", "alpha", "zeta", "late"]
    out = process_pod_list(processors, [], PodListContext(now=datetime(2024, 1, 1, tzinfo=UTC)))
    assert [p.name for p in out] == ["first", "alpha", "zeta", "late"]


def test_the_standard_processors_come_in_their_documented_order(
    installed_plugins: tuple[PluginHost, Registry],
) -> None:
    _, registry = installed_plugins
    processors = build_pod_list_processors(registry, AutoscalingOptions())
    assert [(p.name, p.order) for p in processors] == [
        ("provisioning-request-consumers", 100),
        ("capacity-buffers", 200),
    ]


def test_a_factory_returning_something_else_is_refused() -> None:
    registry = Registry()
    registry.add_pod_list_processor("broken", lambda options: object())
    with pytest.raises(TypeError, match=r"'broken'.*process"):
        build_pod_list_processors(registry, AutoscalingOptions())
