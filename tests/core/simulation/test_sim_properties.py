"""Properties of simulated runs, whatever the workload does."""

from __future__ import annotations

import argparse
from datetime import timedelta

from clusterscaler.commands.cli import load_plugins
from clusterscaler.model import Resources
from clusterscaler.offline.runner import Simulation, provision_initial_nodes, run
from clusterscaler.offline.scenario import parse_scenario
from clusterscaler.offline.setup import (
    build_cluster,
    build_loop,
    build_provider,
    merge_options,
    with_cloud_config,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

_, REGISTRY = load_plugins([])

CLOUD = {
    "nodeGroups": [
        {"name": "small", "minSize": 1, "maxSize": 4, "price": 0.1, "provisionDelay": "30s",
         "template": {"status": {"capacity": {"cpu": "2", "memory": "8Gi"}}}},
        {"name": "large", "minSize": 0, "maxSize": 3, "price": 0.4, "provisionDelay": "90s",
         "template": {"status": {"capacity": {"cpu": "8", "memory": "32Gi"}}}},
    ]
}

events = st.lists(
    st.tuples(
        st.integers(0, 9),  # minute
        st.sampled_from(["web", "batch"]),
        st.integers(0, 30),  # replicas
    ),
    max_size=5,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=events, expander=st.sampled_from(["least-waste", "price", "most-pods"]))
def test_runs_respect_group_bounds_capacity_and_accounting(events, expander) -> None:
    doc = {
        "cloudConfig": CLOUD,
        "initialNodes": {"small": 1},
        "flags": {"expander": expander, "scale-down-unneeded-time": "2m", "scale-down-delay-after-add": "1m", "scan-interval": "30s"},
        "workloads": [
            {"name": "web", "replicas": 2, "cpu": "500m", "memory": "1Gi"},
            {"name": "batch", "kind": "Job", "replicas": 0, "cpu": "1500m", "memory": "2Gi"},
        ],
        "events": [
            {"at": f"{m}m", "scale": {"workload": f"default/{w}", "replicas": r}} for m, w, r in events
        ],
    }
    scenario = parse_scenario(doc, "property")
    args = argparse.Namespace()
    options = with_cloud_config(merge_options(args, scenario.flags, "property"), scenario, "")
    cluster, clock = build_cluster(scenario.objects, scenario)
    provider = build_provider(REGISTRY, options, cluster=cluster, clock=clock)
    provision_initial_nodes(cluster, provider, scenario.initial_nodes)
    loop = build_loop(REGISTRY, options, provider, cluster, clock)
    sim = Simulation(cluster, clock, provider, loop, options.scan_interval, timedelta(minutes=15), scenario.events)

    out, summary = run(sim)

    bounds = {g.id: (g.min_size, g.max_size) for g in provider.node_groups()}
    costs = [s.cost for s in out.samples]
    assert costs == sorted(costs), "cost never decreases"
    for sample in out.samples:
        for group, count in sample.nodes.items():
            assert count <= bounds[group][1], f"{group} above its max at {sample.offset}"
    for group in provider.node_groups():
        assert bounds[group.id][0] <= group.target_size() <= bounds[group.id][1]
    # The scheduler never overcommits a node, and every bound pod's node exists.
    used: dict[str, Resources] = {}
    for pod in cluster.pods.values():
        if pod.node_name:
            assert pod.node_name in cluster.nodes
            used[pod.node_name] = used.get(pod.node_name, Resources()) + pod.requests
    for name, total in used.items():
        assert total.fits(cluster.nodes[name].allocatable)
    # Replicas match the last requested count for each workload.
    for name in ("web", "batch"):
        controller = cluster.find_controller(name)
        assert len(cluster.owned_pods(controller)) == controller.replicas
    assert summary.still_pending == cluster.pending_pod_count()
    # A final load well within the small group's maximum (4 nodes of 2 cores) leaves
    # nothing pending: the last event is at 9m, the run lasts 15m.
    web = cluster.find_controller("web").replicas or 0
    batch = cluster.find_controller("batch").replicas or 0
    if web * 500 + batch * 1500 <= 4000:
        assert summary.still_pending == 0
