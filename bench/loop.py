"""Performance figures of the autoscaling loop.

Run from the repository root with `python -m bench.loop` (or `python bench/loop.py`).
Prints one line per figure with its target; exits non-zero when a target is missed.

Figures:
- scale-up loop:   one `run_once` on 1,000 nodes x 30 pods with 3,000 pending pods of 10
                   shapes (target: under 1 s)
- scale-down loop: one `run_once` on 2,000 nodes x 40 small pods, every node underutilized
                   (target: under 10 s)
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import logging
import platform
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import structlog
from clusterscaler.autoscaler import Autoscaler, build_estimator, build_expander
from clusterscaler.cloudprovider import (
    CloudProviderError,
    Instance,
    InstanceState,
    NodeGroupOptions,
    PricingModel,
    ResourceLimiter,
)
from clusterscaler.cluster import InMemoryCluster
from clusterscaler.drain import build_pod_filters
from clusterscaler.model import Controller, Node, NodeInfo, OwnerRef
from clusterscaler.options import AutoscalingOptions
from clusterscaler.pluginmanager import build_plugin_manager, collect_registry
from clusterscaler.plugins import estimators, expanders, pod_filters
from clusterscaler.simulation.clock import VirtualClock
from clusterscaler.simulator.builders import make_node, make_pod

GROUP_LABEL = "bench.clusterscaler.io/group"
NOW = datetime(2024, 1, 1, tzinfo=UTC)


class BenchGroup:
    """A node group over an in-memory cluster; growing only records the new target."""

    def __init__(self, id: str, max_size: int, template: Node, cluster: InMemoryCluster) -> None:
        self._id = id
        self._max = max_size
        self.template = template
        self.cluster = cluster
        self.instances: dict[str, Instance] = {}
        self.target = 0

    @property
    def id(self) -> str:
        return self._id

    @property
    def min_size(self) -> int:
        return 0

    @property
    def max_size(self) -> int:
        return self._max

    def target_size(self) -> int:
        return self.target

    def increase_size(self, delta: int) -> None:
        if self.target + delta > self._max:
            raise CloudProviderError(f"node group {self.id}: above max size")
        self.target += delta

    def delete_nodes(self, nodes: Sequence[Node]) -> None:
        for n in nodes:
            self.instances.pop(n.provider_id, None)
            self.cluster.remove_node(n.name)
            self.target -= 1

    def decrease_target_size(self, delta: int) -> None:
        self.target += delta

    def nodes(self) -> Sequence[Instance]:
        return list(self.instances.values())

    def template_node_info(self) -> NodeInfo:
        return NodeInfo(self.template)

    def exist(self) -> bool:
        return True

    def get_options(self, defaults: NodeGroupOptions) -> NodeGroupOptions | None:
        return None

    def debug(self) -> str:
        return self.id


class BenchProvider:
    name = "bench"

    def __init__(self, groups: Sequence[BenchGroup]) -> None:
        self.groups = {g.id: g for g in groups}

    def node_groups(self) -> Sequence[BenchGroup]:
        return list(self.groups.values())

    def node_group_for_node(self, node: Node) -> BenchGroup | None:
        return self.groups.get(node.labels.get(GROUP_LABEL, ""))

    def has_instance(self, node: Node) -> bool:
        return True

    def pricing(self) -> PricingModel | None:
        return None

    def resource_limiter(self) -> ResourceLimiter | None:
        return None

    def gpu_label(self) -> str:
        return ""

    def refresh(self) -> None:
        return None

    def cleanup(self) -> None:
        return None


def build_cluster(
    nodes: int, pods_per_node: int, pod_cpu: str, groups: int = 4
) -> tuple[InMemoryCluster, BenchProvider]:
    owners = [OwnerRef("ReplicaSet", f"app{i}", f"uid-app{i}", True, "apps/v1") for i in range(20)]
    cluster = InMemoryCluster(
        controllers=[
            Controller("ReplicaSet", "default", o.name, o.uid, replicas=10_000) for o in owners
        ]
    )
    bench_groups = []
    for gi in range(groups):
        gid = f"group-{gi}"
        template = make_node(f"{gid}-template", "16", "64Gi", labels={GROUP_LABEL: gid})
        bench_groups.append(BenchGroup(gid, nodes * 2, template, cluster))
    seq = 0
    for i in range(nodes):
        group = bench_groups[i % groups]
        name = f"{group.id}-n{i}"
        node = make_node(
            name, "16", "64Gi", labels={GROUP_LABEL: group.id}, provider_id=f"bench://{name}"
        ).with_(creation_time=NOW - timedelta(days=1))
        cluster.add_node(node)
        group.instances[node.provider_id] = Instance(node.provider_id, InstanceState.RUNNING)
        group.target += 1
        for _ in range(pods_per_node):
            owner = owners[seq % len(owners)]
            cluster.add_pod(
                make_pod(
                    f"{owner.name}-{seq}",
                    pod_cpu,
                    "256Mi",
                    owner=owner,
                    labels={"app": owner.name},
                    node_name=name,
                    phase="Running",
                    creation_time=NOW - timedelta(hours=1),
                )
            )
            seq += 1
    return cluster, BenchProvider(bench_groups)


def autoscaler(cluster: InMemoryCluster, provider: BenchProvider) -> Autoscaler:
    host = build_plugin_manager(
        autoload=False,
        extra_plugins={
            "pod-filters": pod_filters,
            "estimators": estimators,
            "expanders": expanders,
        },
    )
    registry = collect_registry(host)
    options = dataclasses.replace(AutoscalingOptions(), scale_down_delay_after_add=timedelta(0))
    return Autoscaler(
        options=options,
        provider=provider,
        source=cluster,
        actions=cluster,
        estimator=build_estimator(registry, options),
        expander=build_expander(registry, options, provider),
        pod_filters=build_pod_filters(registry, options),
        clock=VirtualClock(NOW),
    )


def timed_loop(a: Autoscaler) -> tuple[float, object]:
    gc.collect()
    start = time.perf_counter()
    result = a.run_once(NOW)
    return time.perf_counter() - start, result


def scale_up_loop() -> tuple[float, str]:
    # Nodes are full (30 x 500m of 16 cores), so no pending pod fits existing capacity.
    cluster, provider = build_cluster(1000, 30, "500m")
    shapes = [(f"{1100 + 300 * i}m", f"{1 + i}Gi") for i in range(10)]
    for i in range(3000):
        cpu, mem = shapes[i % 10]
        owner = OwnerRef("ReplicaSet", f"pending{i % 10}", f"uid-pending{i % 10}", True)
        cluster.add_pod(
            make_pod(
                f"pending-{i}",
                cpu,
                mem,
                owner=owner,
                labels={"app": f"pending{i % 10}"},
                unschedulable=True,
                creation_time=NOW - timedelta(minutes=1),
            )
        )
    seconds, result = timed_loop(autoscaler(cluster, provider))
    decisions = result.scale_up.decisions  # type: ignore[attr-defined]
    added = sum(d.delta for d in decisions)
    return seconds, f"{added} nodes added for {len(result.pending_pods)} pending pods"  # type: ignore[attr-defined]


def scale_down_loop() -> tuple[float, str]:
    cluster, provider = build_cluster(2000, 40, "100m")
    seconds, result = timed_loop(autoscaler(cluster, provider))
    sd = result.scale_down  # type: ignore[attr-defined]
    return seconds, f"{len(sd.unneeded)} unneeded, {len(sd.unremovable)} unremovable"


FIGURES = (
    ("scale-up loop (1,000 nodes x 30 pods, 3,000 pending)", scale_up_loop, 1.0),
    ("scale-down loop (2,000 nodes x 40 pods, underutilized)", scale_down_loop, 10.0),
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    # Per-decision logs would dominate the timings; keep warnings only.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(f"# python {platform.python_version()} on {platform.machine()}")
    failed = False
    for title, fn, target in FIGURES:
        seconds, detail = fn()
        ok = seconds < target
        failed = failed or not ok
        print(
            f"{title}: {seconds:.3f} s (target < {target:g} s) {'ok' if ok else 'MISSED'}; {detail}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
