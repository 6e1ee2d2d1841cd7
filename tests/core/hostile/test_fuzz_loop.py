"""Fuzz target for the loop: a hostile Pod, Node or PodDisruptionBudget beside a healthy
cluster, read through the guard of the live caches (`read_guarded`), then two loops of the
real `Autoscaler`. Whatever the object:
- no loop fails (no exception, no error in the result);
- an object that cannot be read is named in the loop's result (the status ConfigMap and
  `explain` read it there), by the key the caches give it;
- the healthy node groups still scale: a pending pod that only group `h` can take gets its
  node, and the empty healthy node goes once unneeded long enough (three loops);
- the node holding a pod that cannot be read is never removed and nothing on it is evicted.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from clusterscaler.framework.inmemorycluster import InMemoryCluster
from clusterscaler.framework.options import AutoscalingOptions, MinMax
from clusterscaler.framework.pluginmanager import build_plugin_manager, collect_registry
from clusterscaler.loop.autoscaler import Autoscaler, build_estimator, build_expander
from clusterscaler.model import (
    ClusterObjects,
    Controller,
    Node,
    OwnerRef,
    Pod,
    PodDisruptionBudget,
    UnreadableObject,
    object_key,
    parse_node,
    parse_pdb,
    parse_pod,
    read_guarded,
)
from clusterscaler.offline.clock import VirtualClock
from clusterscaler.plugins import estimators, expanders, pod_filters
from clusterscaler.simulator.builders import make_pod
from clusterscaler.simulator.drain import build_pod_filters
from clusterscaler.testing.fakecloud import GROUP_LABEL, FakeCloud
from fuzzkit import QUICK_FUZZ, bounded, mutated, seeds_by_kind, size_of
from hypothesis import given
from hypothesis import strategies as st

pytestmark = pytest.mark.fuzz

T0 = datetime(2024, 1, 1, tzinfo=UTC)
SEEDS = seeds_by_kind(("Pod", "Node", "PodDisruptionBudget"))
WEB = OwnerRef("ReplicaSet", "web", "uid-rs-web", True, "apps/v1")


class HostileCluster(InMemoryCluster):
    """The in-memory cluster, whose snapshots also carry the objects that could not be read
    (as the live caches' snapshots do)."""

    unreadable: tuple[UnreadableObject, ...] = ()

    def snapshot(self) -> ClusterObjects:
        objects = super().snapshot()
        objects.unreadable = list(self.unreadable)
        return objects


def _bound_to(raw: dict[str, Any], node: str) -> dict[str, Any]:
    """The hostile pod, bound to `node` and running where its shape lets it say so: it is
    then a pod of that node, never a pending pod competing with the healthy one."""
    spec = raw.get("spec")
    if isinstance(spec, dict):
        spec["nodeName"] = node
    status = raw.get("status")
    if isinstance(status, dict):
        status["phase"] = "Running"
    return raw


@st.composite
def hostile_objects(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    kind = draw(st.sampled_from(["Pod", "Pod", "Node", "PodDisruptionBudget"]))
    raw = draw(mutated(SEEDS[kind]))
    meta = raw.get("metadata")
    if isinstance(meta, dict):
        # One object of that name: a mutation may still have broken the name itself.
        meta.setdefault("name", "hostile")
        if isinstance(meta["name"], str) and meta["name"]:
            meta["name"] = "hostile"
    if kind == "Pod":
        raw = _bound_to(raw, "g-1")
    return kind, raw


def _autoscaler(cluster: HostileCluster, provider: FakeCloud, clock: VirtualClock) -> Autoscaler:
    registry = collect_registry(
        build_plugin_manager(
            autoload=False,
            extra_plugins={
                "pod-filters": pod_filters,
                "estimators": estimators,
                "expanders": expanders,
            },
        )
    )
    # A node may hold a huge but valid capacity (300,000 cores): counted in the cluster's
    # totals, as CA counts every node, it can use up --cores-total or --memory-total, and
    # the scale-up is then refused for the limit, rightly. The limits are set out of reach:
    # what this target looks for is the loop failing, not the limits doing their work.
    options = replace(
        AutoscalingOptions(), cores_total=MinMax(0, 2**62), memory_total=MinMax(0, 2**62)
    )
    return Autoscaler(
        options=options,
        provider=provider,
        source=cluster,
        actions=cluster,
        estimator=build_estimator(registry, options),
        expander=build_expander(registry, options, provider),
        pod_filters=build_pod_filters(registry, options),
        clock=clock,
    )


PARSERS = {"Pod": parse_pod, "Node": parse_node, "PodDisruptionBudget": parse_pdb}


@QUICK_FUZZ
@given(hostile=hostile_objects())
def test_one_hostile_object_never_stops_the_loop_for_the_rest(
    hostile: tuple[str, dict[str, Any]],
) -> None:
    kind, raw = hostile
    key = object_key(raw)
    clock = VirtualClock(T0)
    cluster = HostileCluster(
        controllers=[Controller("ReplicaSet", "default", "web", "uid-rs-web", replicas=3)]
    )
    provider = FakeCloud(cluster, clock, name="fake", existing_since=T0 - timedelta(days=1))
    provider.add_group("g", 0, 10, nodes=3)
    provider.add_group("h", 0, 10, instant=True)
    # g-1 holds the hostile pod (when it is one); g-2 is busy; g-3 is empty and unneeded.
    cluster.add_pod(make_pod("busy", "3", "1Gi", node_name="g-2", phase="Running", owner=WEB,
                             creation_time=T0 - timedelta(hours=5)))
    cluster.add_pod(make_pod("waiting", "1", "1Gi", unschedulable=True, owner=WEB,
                             node_selector={GROUP_LABEL: "h"},
                             creation_time=T0 - timedelta(minutes=5)))

    with bounded(size_of(raw)):
        item = read_guarded(copy.deepcopy(raw), kind, PARSERS[kind])
    if isinstance(item, UnreadableObject):
        assert item.key == key and item.kind == kind and item.error
        cluster.unreadable = (item,)
    elif isinstance(item, Pod):
        cluster.add_pod(item)
    elif isinstance(item, Node):
        cluster.add_node(item)
    else:
        assert isinstance(item, PodDisruptionBudget)
        cluster.pdbs[item.key] = item

    autoscaler = _autoscaler(cluster, provider, clock)
    with bounded(size_of(raw)):
        first = autoscaler.run_once(clock.now())
    assert not first.errors, first.errors
    assert [(u.kind, u.key) for u in first.unreadable] == [
        (u.kind, u.key) for u in cluster.unreadable
    ]
    assert provider.groups["h"].target_size() == 1, first.scale_up

    # The scale-up holds scale-down off in its own loop: the empty nodes are unneeded from
    # the second loop on, and removable in the third.
    removed: set[str] = set()
    for _ in range(2):
        clock.advance(timedelta(minutes=11))
        with bounded(size_of(raw)):
            later = autoscaler.run_once(clock.now())
        assert not later.errors, later.errors
        removed |= {d.node for d in later.scale_down.deletions if d.ok}
    if cluster.unreadable and cluster.unreadable[0].node_name == "g-1":
        assert "g-1" not in removed and "g-1" in cluster.nodes
        assert not [p for p in cluster.evicted if p.endswith("/hostile")]
    if isinstance(item, UnreadableObject) or kind != "Pod":
        # Nothing readable keeps g-3 (the hostile node or budget is no pod of it).
        assert "g-3" in removed or not any(n == "g-3" for n in cluster.nodes), later.scale_down
